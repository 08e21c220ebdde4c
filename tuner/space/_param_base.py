"""The common base of the parameter kinds: conditions, defaults, and the flag/variable target.

Each kind knows four things: which values it allows (:meth:`Param.check_value`), how Optuna
samples it (:meth:`Param.suggest`, with ``encode``/``decode`` as the way back from
``trial.params``), what it adds to the server's launch (``render``), and which condition values fit
it (``check_test``). The value ``None`` means "unset": the flag or variable is left out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import optuna
from pydantic import field_validator, model_validator

from tuner.space._conditions import Clause, Condition, When, parse_condition, same_value
from tuner.space._numbers import is_number
from tuner.space._problems import FieldProblem, shown
from tuner.space._strict import StrictModel, check_env_name, check_flag

__all__ = [
    "Param",
    "TargetedParam",
    "Rendered",
    "LEGACY_SET_SUFFIX",
    "SET_SUFFIX",
    "SHAPES",
    "value_text",
]

# "<name> is set" (true/false): the Optuna parameter that chooses between the engine's default
# (the flag left out) and a number, named so that it reads in optuna-dashboard's plots. Studies
# made before it was named so call it "<name>__set": read, never written (a resumed study's new
# trials carry the new name; only the sampler's history of that yes/no starts again).
SET_SUFFIX = " is set"
LEGACY_SET_SUFFIX = "__set"
# How a numeric parameter's effect behaves (``shape:``), for strategies that use it:
# up_to_failure: best just below a failure cliff (e.g. mem_fraction_static);
# saturating: stops mattering once high enough (e.g. max_running_requests).
SHAPES = ("up_to_failure", "saturating")


@dataclass
class Rendered:
    """What the active parameters add to one launch: flags, environment, patches."""

    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    patches: set[str] = field(default_factory=set)
    json_flags: dict[str, dict[str, Any]] = field(default_factory=dict)

    def all_args(self) -> list[str]:
        """The flags, then each JSON-valued flag once with the keys its parameters gave
        (``--speculative-config '{"method":"ngram","num_speculative_tokens":4}'``)."""
        composed = [
            [flag, json.dumps(keys, separators=(",", ":"))]
            for flag, keys in self.json_flags.items()
            if keys
        ]
        return self.args + [word for pair in composed for word in pair]


def value_text(value: Any, *, for_env: bool = False) -> str:
    """A value as it goes on the command line (``true``/``false``) or into a variable (1/0)."""
    if isinstance(value, bool):
        return ("1" if value else "0") if for_env else ("true" if value else "false")
    return str(value)


class Param(StrictModel):
    """What every kind has: a condition, an optional default, a description."""

    description: str = ""
    when: When | None = None
    default: Any = None
    shape: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Param:
        self._check_spec()
        self._check_shape()
        if self.has_default:
            try:
                self.check_value(self.default)
            except FieldProblem as problem:
                raise FieldProblem(problem.reason, problem.fix, at=("default",)) from None
        return self

    @property
    def has_default(self) -> bool:
        """Whether ``default:`` was written (``default: null`` means unset)."""
        return "default" in self.model_fields_set

    @property
    def condition(self) -> Condition:
        """The parsed ``when:``."""
        return parse_condition(self.when)

    def _check_spec(self) -> None:
        """Check the fields against each other (overridden by kinds that have any)."""

    def _check_shape(self) -> None:
        if self.shape is None:
            return
        if self.shape not in SHAPES:
            raise FieldProblem(
                f"{self.shape!r} is not a shape",
                f"use one of {', '.join(SHAPES)}, or drop shape:",
                at=("shape",),
            )
        if not self.numeric_options():
            raise FieldProblem(
                f"{self.shape} applies to numbers, but the values are {self.options_text()}",
                "drop shape: here, or declare it on an int or float parameter",
                at=("shape",),
            )

    def numeric_options(self) -> list[Any] | None:
        """The values when they are all numbers (a range counts), else None."""
        values = [o for o in self.options() if o is not None]
        if values and all(is_number(o) and not isinstance(o, bool) for o in values):
            return values
        return None

    def options(self) -> list[Any]:
        """The values, for kinds with a short list of them."""
        return [False, True]

    def check_value(self, value: Any) -> Any:
        """The value, normalised; a value this parameter cannot take raises FieldProblem."""
        if any(same_value(value, option) for option in self.options()):
            return value
        raise FieldProblem(f"{shown(value)} is not allowed", f"use one of {self.options_text()}")

    def options_text(self) -> str:
        """The allowed values, for messages."""
        return ", ".join("null (unset)" if o is None else shown(o) for o in self.options())

    def suggest(self, trial: optuna.Trial, name: str) -> Any:
        """Sample a value through Optuna (define-by-run)."""
        return trial.suggest_categorical(name, self.options())

    def encode(self, name: str, value: Any) -> dict[str, Any]:
        """The Optuna params that make :meth:`suggest` return ``value`` (for enqueue_trial)."""
        return {name: value}

    def decode(self, name: str, params: dict[str, Any]) -> Any:
        """The value :meth:`suggest` returned, read back from ``trial.params``."""
        if name not in params:
            raise FieldProblem(
                f"no value for {name!r} in the trial's params",
                "the study was made with another search space",
            )
        return self.check_value(params[name])

    def check_test(self, clause: Clause) -> str | None:
        """Why ``clause`` cannot apply to this parameter, or None when it fits."""
        if clause.op in ("lt", "le", "gt", "ge"):
            numbers = [o for o in self.options() if o is not None]
            if not numbers or not all(is_number(o) for o in numbers):
                return f"{clause.op} compares numbers, but the values are {self.options_text()}"
            return None
        for value in clause.values():
            if not any(same_value(value, o) for o in self.options()):
                return f"{shown(value)} is not a value of this parameter ({self.options_text()})"
        return None

    def flags(self) -> list[str]:
        """The flags this parameter can put on the command line."""
        return []

    def render(self, value: Any, out: Rendered) -> None:
        """Add what ``value`` means to one launch."""


class TargetedParam(Param):
    """A value given as ``--flag value`` or as a variable; ``unset`` may leave it out."""

    flag: str | None = None
    env: str | None = None
    unset: bool = False
    # The value goes into the flag's one JSON argument under this key, with the other
    # parameters' keys of the same flag (vLLM's --speculative-config), not as `--flag value`.
    json_key: str | None = None

    @field_validator("flag")
    @classmethod
    def _flag_name(cls, value: str | None) -> str | None:
        return None if value is None else check_flag(value)

    @field_validator("env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        return None if value is None else check_env_name(value)

    def _check_spec(self) -> None:
        if (self.flag is None) == (self.env is None):
            raise FieldProblem(
                "needs exactly one of flag: or env:",
                "give `flag: --name` for a server flag or `env: NAME` for a variable",
            )
        if self.json_key is not None and (self.flag is None or not self.json_key.isidentifier()):
            raise FieldProblem(
                f"json_key {self.json_key!r} needs a flag: and a key of letters, digits and _",
                "write e.g. `{flag: --speculative-config, json_key: method}`",
                at=("json_key",),
            )

    def flags(self) -> list[str]:
        return [self.flag] if self.flag else []

    def render(self, value: Any, out: Rendered) -> None:
        if value is None:
            return
        if self.flag and self.json_key:
            out.json_flags.setdefault(self.flag, {})[self.json_key] = value
        elif self.flag:
            out.args += [self.flag, value_text(value)]
        else:
            out.env[self.env or ""] = value_text(value, for_env=True)

    def _unset_value(self) -> None:
        if not self.unset:
            raise FieldProblem(
                "null (unset) is not an option here",
                "give a value, or add `unset: true` to the parameter",
            )
