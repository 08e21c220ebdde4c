"""Numeric parameter kinds: ``int`` and ``float``, with step, log scale and "unset"."""

from __future__ import annotations

from typing import Any, Literal

import optuna

from tuner.space._conditions import Clause
from tuner.space._numbers import FloatGrid, is_number
from tuner.space._param_base import SET_SUFFIX, TargetedParam
from tuner.space._problems import FieldProblem, shown

__all__ = ["IntParam", "FloatParam"]


class _Ranged(TargetedParam):
    """A number in ``[low, high]``; ``unset: true`` adds a ``<name>__set`` yes/no in Optuna."""

    log: bool = False

    def _check_range(self) -> None:
        super()._check_spec()
        if self.low >= self.high:
            raise FieldProblem(f"must be below high ({self.low:g} >= {self.high:g})",
                               "set low below high (use a categorical for a single value)",
                               at=("low",))

    def numeric_options(self) -> list[Any] | None:
        return [self.low, self.high]

    def options_text(self) -> str:
        if self.step not in (None, 1):
            grid = f" step {self.step:g}"
        else:
            grid = " (log)" if self.log else ""
        return f"{self.low:g}..{self.high:g}{grid}" + (" or null (unset)" if self.unset else "")

    def _sample(self, trial: optuna.Trial, name: str) -> Any:
        raise NotImplementedError

    def suggest(self, trial: optuna.Trial, name: str) -> Any:
        if self.unset and not trial.suggest_categorical(name + SET_SUFFIX, [True, False]):
            return None
        return self._sample(trial, name)

    def encode(self, name: str, value: Any) -> dict[str, Any]:
        params: dict[str, Any] = {name + SET_SUFFIX: value is not None} if self.unset else {}
        if value is not None:
            params[name] = value
        return params

    def decode(self, name: str, params: dict[str, Any]) -> Any:
        if self.unset and params.get(name + SET_SUFFIX) is False:
            return None
        return super().decode(name, params)

    def check_test(self, clause: Clause) -> str | None:
        for value in clause.values():
            if not (is_number(value) or (value is None and self.unset)):
                return f"{shown(value)} is not a number (this parameter is {self.options_text()})"
        return None


class IntParam(_Ranged):
    """A whole number in ``[low, high]``, on a ``step`` grid or sampled on a log scale."""

    kind: Literal["int"]
    low: int
    high: int
    step: int = 1

    def _check_spec(self) -> None:
        self._check_range()
        if self.step < 1:
            raise FieldProblem(f"must be at least 1 (got {self.step})", "use step: 1 or more",
                               at=("step",))
        if self.log and self.step != 1:
            raise FieldProblem("step and log: true cannot be combined (Optuna refuses it)",
                               "drop step, or set log: false", at=("step",))
        if self.log and self.low < 1:
            raise FieldProblem(f"log: true needs low >= 1 (got {self.low})",
                               "raise low to 1 or more, or set log: false", at=("low",))
        if (self.high - self.low) % self.step:
            raise FieldProblem(f"{self.step} does not divide high - low ({self.high - self.low})",
                               "choose low, high and step so that (high - low) / step is whole",
                               at=("step",))

    def check_value(self, value: Any) -> Any:
        if value is None:
            self._unset_value()
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise FieldProblem(f"{shown(value)} is not a whole number",
                               f"use {self.options_text()}")
        if not self.low <= value <= self.high or (value - self.low) % self.step:
            raise FieldProblem(f"{value} is outside {self.options_text()}",
                               f"use a value in {self.options_text()}")
        return value

    def _sample(self, trial: optuna.Trial, name: str) -> Any:
        return trial.suggest_int(name, self.low, self.high, step=self.step, log=self.log)


class FloatParam(_Ranged):
    """A real number in ``[low, high]``, optionally on a ``step`` grid or on a log scale."""

    kind: Literal["float"]
    low: float
    high: float
    step: float | None = None

    @property
    def grid(self) -> FloatGrid:
        """The range and step, with rounding to the step's decimals."""
        return FloatGrid(self.low, self.high, self.step)

    def _check_spec(self) -> None:
        self._check_range()
        if self.step is not None and self.step <= 0:
            raise FieldProblem(f"must be above 0 (got {self.step})", "use e.g. step: 0.01",
                               at=("step",))
        if self.log and self.step is not None:
            raise FieldProblem("step and log: true cannot be combined (Optuna refuses it)",
                               "drop step, or set log: false", at=("step",))
        if self.log and self.low <= 0:
            raise FieldProblem(f"log: true needs low > 0 (got {self.low})",
                               "raise low above 0, or set log: false", at=("low",))
        if self.step is not None and not self.grid.divides():
            span = self.high - self.low
            raise FieldProblem(f"{self.step} does not divide high - low ({span:g})",
                               "choose low, high and step so that (high - low) / step is whole",
                               at=("step",))

    def check_value(self, value: Any) -> Any:
        if value is None:
            self._unset_value()
            return None
        if not is_number(value):
            raise FieldProblem(f"{shown(value)} is not a number", f"use {self.options_text()}")
        if not self.grid.contains(value):
            raise FieldProblem(f"{shown(value)} is outside {self.options_text()}",
                               f"use a value in {self.options_text()}")
        return self.grid.normalize(value)

    def _sample(self, trial: optuna.Trial, name: str) -> Any:
        value = trial.suggest_float(name, self.low, self.high, step=self.step, log=self.log)
        return self.grid.normalize(value)
