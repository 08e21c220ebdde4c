"""The values a strategy tries for one parameter: every option of a short list, or a few points
spread over a numeric range (on its grid, log-spaced for ``log: true``)."""

from __future__ import annotations

import math
from typing import Any

from tuner.space._problems import FieldProblem

__all__ = ["sweep_values", "POINTS"]

POINTS = 5  # points tried over a numeric range


def sweep_values(param: Any, points: int = POINTS) -> list[Any]:
    """The values to try for ``param`` (unset included when allowed), in order, no repeats."""
    if not hasattr(param, "low"):
        return list(param.options())
    low, high = float(param.low), float(param.high)
    if param.log:
        raw = [
            math.exp(math.log(low) + (math.log(high) - math.log(low)) * i / (points - 1))
            for i in range(points)
        ]
    else:
        raw = [low + (high - low) * i / (points - 1) for i in range(points)]
    values: list[Any] = []
    for x in raw:
        value = _on_grid(param, x)
        if value is not None and value not in values:
            values.append(value)
    return values + ([None] if param.unset else [])


def _on_grid(param: Any, x: float) -> Any:
    step = getattr(param, "step", None)
    if param.kind == "int":
        x = param.low + round((x - param.low) / step) * step if step else round(x)
        x = int(min(param.high, max(param.low, x)))
    elif step:
        x = param.low + round((x - param.low) / step) * step
    try:
        return param.check_value(x)
    except FieldProblem:
        return None
