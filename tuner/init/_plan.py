"""The records a lever choice produces: the parameters, patches, constraints and ``fit:`` of the
space, and what was left out and why. :mod:`tuner.init._levers` fills a :class:`Plan`;
:mod:`tuner.init._render` writes it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tuner.init._command import LaunchCommand

__all__ = ["INACTIVE", "Constraint", "Param", "Plan", "baseline_value"]

INACTIVE = object()  # a parameter whose `when:` does not hold for the user's command


@dataclass(frozen=True)
class Param:
    """One searched parameter: its YAML spec, the user's value, and the comment beside it."""

    name: str
    spec: dict[str, Any]
    baseline: Any
    why: str

    @property
    def flags(self) -> list[str]:
        flag = self.spec.get("flag")
        if not flag:
            return []
        if self.spec["kind"] == "paired":
            return [flag, "--no-" + flag.lstrip("-")]
        return [flag]


@dataclass(frozen=True)
class Constraint:
    when: dict[str, Any]
    action: str  # skip | warn
    reason: str


@dataclass
class Plan:
    """What the space searches, and what it leaves out."""

    params: list[Param] = field(default_factory=list)
    patches: dict[str, dict[str, str]] = field(default_factory=dict)
    constraints: list[Constraint] = field(default_factory=list)
    fit: dict[str, Any] | None = None
    fit_why: str = ""
    left_out: list[str] = field(default_factory=list)

    def add(self, param: Param | None) -> None:
        if param is not None:
            self.params.append(param)

    def has(self, name: str) -> bool:
        return any(p.name == name for p in self.params)

    def searched_flags(self) -> set[str]:
        return {flag for param in self.params for flag in param.flags}


def _number(text: str) -> int | float | str:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def baseline_value(command: LaunchCommand, spec: dict[str, Any]) -> Any:
    """The value the user's command gives the parameter ``spec`` describes (None: unset)."""
    kind, flag = spec["kind"], spec.get("flag")
    if flag is None:  # an env-only parameter: the command cannot set it
        return None
    if kind == "bool":
        return command.has(flag) != bool(spec.get("when_false"))
    if kind == "store_true":
        return command.has(flag)
    if kind == "paired":
        if command.has(flag):
            return True
        return False if command.has("--no-" + flag.lstrip("-")) else None
    value = command.value(flag)
    if value is None or isinstance(value, tuple):
        return None
    if kind == "float":
        return float(value)
    if kind == "int":
        return int(value)
    return _number(value)
