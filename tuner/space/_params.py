"""The parameter kinds of a search space, as one pydantic union discriminated by ``kind``.

``categorical``, ``int`` and ``float`` give ``--flag value`` (or an environment variable);
``store_true``, ``bool`` and ``paired`` give bare flags; ``patch`` switches a source patch.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from tuner.space._conditions import same_value
from tuner.space._param_base import Param, Rendered, TargetedParam
from tuner.space._problems import FieldProblem, shown
from tuner.space._ranges import FloatParam, IntParam
from tuner.space._strict import check_flag

__all__ = [
    "Parameter",
    "KINDS",
    "CategoricalParam",
    "IntParam",
    "FloatParam",
    "StoreTrueParam",
    "BoolParam",
    "PairedParam",
    "PatchParam",
]


class CategoricalParam(TargetedParam):
    """One of a list of values (strings, numbers, booleans; mixed types allowed)."""

    kind: Literal["categorical"]
    choices: list[Any]

    def _check_spec(self) -> None:
        super()._check_spec()
        if not self.choices:
            raise FieldProblem(
                "no choices", "list at least one value: choices: [a, b]", at=("choices",)
            )
        for index, choice in enumerate(self.choices):
            if choice is None:
                raise FieldProblem(
                    "null is not a choice",
                    "remove it and add `unset: true`",
                    at=("choices", index),
                )
            if not isinstance(choice, (str, int, float, bool)):
                raise FieldProblem(
                    f"{shown(choice)} is not a single value",
                    "use strings, numbers or true/false",
                    at=("choices", index),
                )
            if any(same_value(choice, other) for other in self.choices[:index]):
                raise FieldProblem(
                    f"{shown(choice)} is listed twice",
                    "list each value once",
                    at=("choices", index),
                )

    def options(self) -> list[Any]:
        return [*self.choices, None] if self.unset else list(self.choices)

    def check_value(self, value: Any) -> Any:
        if value is None:
            self._unset_value()
            return None
        for choice in self.choices:
            if same_value(value, choice):
                return choice
        raise FieldProblem(
            f"{shown(value)} is not one of the choices", f"use one of {self.options_text()}"
        )


class _FlagSwitch(Param):
    """A yes/no value given as a bare flag."""

    flag: str

    @field_validator("flag")
    @classmethod
    def _flag_name(cls, value: str) -> str:
        return check_flag(value)

    def flags(self) -> list[str]:
        return [self.flag]


class StoreTrueParam(_FlagSwitch):
    """A bare flag: given when true, left out when false."""

    kind: Literal["store_true"]

    def render(self, value: Any, out: Rendered) -> None:
        if value:
            out.args.append(self.flag)


class BoolParam(_FlagSwitch):
    """A bare flag for a yes/no choice; ``when_false: true`` gives it when the value is false.

    ``{kind: bool, flag: --disable-cuda-graph, when_false: true}`` keeps the parameter's name
    positive (``cuda_graph: true`` means graphs on, no flag).
    """

    kind: Literal["bool"]
    when_false: bool = False

    def render(self, value: Any, out: Rendered) -> None:
        if value != self.when_false:
            out.args.append(self.flag)


class PairedParam(Param):
    """A ``--x`` / ``--no-x`` pair: true gives ``flag``, false gives ``negative_flag``."""

    kind: Literal["paired"]
    flag: str
    negative_flag: str | None = None
    unset: bool = False

    @field_validator("flag", "negative_flag")
    @classmethod
    def _flag_names(cls, value: str | None) -> str | None:
        return None if value is None else check_flag(value)

    @property
    def negative(self) -> str:
        """The flag for false (default: ``--no-`` and the flag's name)."""
        return self.negative_flag or "--no-" + self.flag.lstrip("-")

    def options(self) -> list[Any]:
        return [True, False, None] if self.unset else [True, False]

    def flags(self) -> list[str]:
        return [self.flag, self.negative]

    def render(self, value: Any, out: Rendered) -> None:
        if value is not None:
            out.args.append(self.flag if value else self.negative)


class PatchParam(Param):
    """A source patch (declared under ``patches:``) applied when true."""

    kind: Literal["patch"]
    patch: str

    def render(self, value: Any, out: Rendered) -> None:
        if value:
            out.patches.add(self.patch)


Parameter = Annotated[
    CategoricalParam
    | IntParam
    | FloatParam
    | StoreTrueParam
    | BoolParam
    | PairedParam
    | PatchParam,
    Field(discriminator="kind"),
]
KINDS = frozenset({"categorical", "int", "float", "store_true", "bool", "paired", "patch"})
