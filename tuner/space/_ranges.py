"""Numeric parameter kinds: ``int`` and ``float``, with step, log scale and "unset"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import optuna

from tuner.space._conditions import Clause
from tuner.space._numbers import FloatGrid, IntGrid, is_number
from tuner.space._param_base import LEGACY_SET_SUFFIX, SET_SUFFIX, TargetedParam
from tuner.space._problems import FieldProblem, shown

__all__ = ["IntParam", "FloatParam"]


@dataclass(frozen=True)
class _Numbers:
    """What a range says and does that depends on its kind of number (whole or real)."""

    noun: str  # a value of another type "is not a <noun>"
    accepts: Callable[[Any], bool]  # which values are of the kind
    positive: str  # what a step must be: "at least 1", "above 0"
    log_low: str  # what low must be on a log scale: ">= 1", "> 0"
    raise_low: str  # the fix for a low too small for a log scale
    step_fix: str  # the fix for a step that is not positive
    no_step: float | None  # the step of a range without a grid of its own (log: true needs it)
    suggest: str  # the ``optuna.Trial`` method that samples it


_WHOLE = _Numbers(
    "whole number",
    lambda value: is_number(value) and isinstance(value, int),
    "at least 1",
    ">= 1",
    "raise low to 1 or more",
    "use step: 1 or more",
    1,
    "suggest_int",
)
_REAL = _Numbers(
    "number",
    is_number,
    "above 0",
    "> 0",
    "raise low above 0",
    "use e.g. step: 0.01",
    None,
    "suggest_float",
)


def _number_text(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


class _Ranged(TargetedParam):
    """A number in ``[low, high]``, on its :attr:`grid`; ``unset: true`` adds a ``<name> is set``
    yes/no in Optuna. :class:`IntParam` and :class:`FloatParam` say which kind of number."""

    numbers: ClassVar[_Numbers]
    log: bool = False
    if TYPE_CHECKING:  # fields that IntParam and FloatParam declare, each with its own types
        low: float
        high: float
        step: float | None

    @property
    def grid(self) -> IntGrid | FloatGrid:
        """The range and step (real numbers rounded to the step's decimals)."""
        raise NotImplementedError

    def _check_spec(self) -> None:
        super()._check_spec()
        if self.low >= self.high:
            raise FieldProblem(
                f"must be below high ({self.low:g} >= {self.high:g})",
                "set low below high (use a categorical for a single value)",
                at=("low",),
            )
        if self.step is not None and self.step <= 0:
            raise FieldProblem(
                f"must be {self.numbers.positive} (got {self.step})",
                self.numbers.step_fix,
                at=("step",),
            )
        if self.log and self.step != self.numbers.no_step:
            raise FieldProblem(
                "step and log: true cannot be combined (Optuna refuses it)",
                "drop step, or set log: false",
                at=("step",),
            )
        if self.log and self.low <= 0:
            raise FieldProblem(
                f"log: true needs low {self.numbers.log_low} (got {self.low})",
                f"{self.numbers.raise_low}, or set log: false",
                at=("low",),
            )
        if not self.grid.divides():
            span = _number_text(self.high - self.low)
            raise FieldProblem(
                f"{self.step} does not divide high - low ({span})",
                "choose low, high and step so that (high - low) / step is whole",
                at=("step",),
            )

    def check_value(self, value: Any) -> Any:
        if value is None:
            self._unset_value()
            return None
        if not self.numbers.accepts(value):
            raise FieldProblem(
                f"{shown(value)} is not a {self.numbers.noun}", f"use {self.options_text()}"
            )
        if not self.grid.contains(value):
            raise FieldProblem(
                f"{shown(value)} is outside {self.options_text()}",
                f"use a value in {self.options_text()}",
            )
        return self.grid.normalize(value)

    def numeric_options(self) -> list[Any] | None:
        return [self.low, self.high]

    def options_text(self) -> str:
        if self.step not in (None, 1):
            grid = f" step {self.step:g}"
        else:
            grid = " (log)" if self.log else ""
        return f"{self.low:g}..{self.high:g}{grid}" + (" or null (unset)" if self.unset else "")

    def suggest(self, trial: optuna.Trial, name: str) -> Any:
        if self.unset and not trial.suggest_categorical(name + SET_SUFFIX, [True, False]):
            return None
        sample = getattr(trial, self.numbers.suggest)
        return self.grid.normalize(sample(name, self.low, self.high, step=self.step, log=self.log))

    def encode(self, name: str, value: Any) -> dict[str, Any]:
        params: dict[str, Any] = {name + SET_SUFFIX: value is not None} if self.unset else {}
        if value is not None:
            params[name] = value
        return params

    def decode(self, name: str, params: dict[str, Any]) -> Any:
        given = params.get(name + SET_SUFFIX, params.get(name + LEGACY_SET_SUFFIX))
        if self.unset and given is False:
            return None
        return super().decode(name, params)

    def check_test(self, clause: Clause) -> str | None:
        for value in clause.values():
            if not (is_number(value) or (value is None and self.unset)):
                return f"{shown(value)} is not a number (this parameter is {self.options_text()})"
        return None


class IntParam(_Ranged):
    """A whole number in ``[low, high]``, on a ``step`` grid or sampled on a log scale."""

    numbers: ClassVar[_Numbers] = _WHOLE
    kind: Literal["int"]
    low: int
    high: int
    step: int = 1

    @property
    def grid(self) -> IntGrid:
        return IntGrid(self.low, self.high, self.step)


class FloatParam(_Ranged):
    """A real number in ``[low, high]``, optionally on a ``step`` grid or on a log scale."""

    numbers: ClassVar[_Numbers] = _REAL
    kind: Literal["float"]
    low: float
    high: float
    step: float | None = None

    @property
    def grid(self) -> FloatGrid:
        return FloatGrid(self.low, self.high, self.step)
