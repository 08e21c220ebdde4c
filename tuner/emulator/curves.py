"""Piecewise-linear curves by batch size, the form of every effect the emulator reads by batch."""

from __future__ import annotations

from itertools import pairwise

__all__ = ["interpolate"]


def interpolate(points: tuple[tuple[int, float], ...], batch: int) -> float:
    """The value at ``batch`` between ``(batch, value)`` points, held flat beyond both ends."""
    if batch <= points[0][0]:
        return points[0][1]
    for (b0, v0), (b1, v1) in pairwise(points):
        if batch <= b1:
            return v0 + (v1 - v0) * (batch - b0) / (b1 - b0)
    return points[-1][1]
