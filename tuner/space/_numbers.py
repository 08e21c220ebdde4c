"""Number ranges on a step grid: whole numbers exactly (:class:`IntGrid`), real numbers rounded so
that 0.92 stays 0.92, not 0.9199999999999999 (:class:`FloatGrid`).

Optuna computes stepped floats as ``low + k * step``, which drifts in the last digits; a drifted
value would render as an ugly flag and would not be recognised as the same configuration again.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

__all__ = ["IntGrid", "FloatGrid", "is_number"]

_TOLERANCE = 1e-9


def is_number(value: Any) -> bool:
    """An int or float, but not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _decimals(value: float) -> int:
    exponent = Decimal(repr(float(value))).normalize().as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


@dataclass(frozen=True)
class FloatGrid:
    """``[low, high]``, optionally on a grid of ``step``."""

    low: float
    high: float
    step: float | None = None

    def _scale(self) -> float:
        return max(1.0, abs(self.low), abs(self.high))

    def divides(self) -> bool:
        """Whether ``step`` divides ``high - low`` (up to rounding)."""
        if self.step is None:
            return True
        count = (self.high - self.low) / self.step
        return abs(count - round(count)) < 1e-6

    def contains(self, value: float) -> bool:
        """Whether ``value`` is in the range and on the grid (up to rounding)."""
        slack = _TOLERANCE * self._scale()
        if not self.low - slack <= value <= self.high + slack:
            return False
        if self.step is None:
            return True
        count = (value - self.low) / self.step
        return abs(count - round(count)) < 1e-6

    def normalize(self, value: float) -> float:
        """``value`` snapped to the grid and rounded to the decimals of low and step."""
        value = float(value)
        if self.step is None:
            return value
        count = round((value - self.low) / self.step)
        digits = max(_decimals(self.low), _decimals(self.step))
        snapped = round(self.low + count * self.step, digits)
        return float(min(max(snapped, self.low), self.high))


@dataclass(frozen=True)
class IntGrid:
    """``[low, high]`` on a grid of ``step`` (1: every whole number); exact, nothing to round."""

    low: int
    high: int
    step: int = 1

    def divides(self) -> bool:
        """Whether ``step`` divides ``high - low``."""
        return not (self.high - self.low) % self.step

    def contains(self, value: int) -> bool:
        """Whether ``value`` is in the range and on the grid."""
        return self.low <= value <= self.high and not (value - self.low) % self.step

    def normalize(self, value: int) -> int:
        """``value`` as it is (a whole number on the grid needs no rounding)."""
        return value
