"""A configuration's figure over several runs: mean, spread, and when two are tied.

The winner's re-measures (:mod:`tuner.study.loop._confirm`) are stored in the study's ``repeats``
attribute (:data:`tuner.study.record.REPEATS`) by trial number (``{"7": {"values": [4612.0, 4540.3, 4581.1], "failed": [],
"levels": [[...], [...]]}}``: the trial's own value first, then each re-run's; ``levels``: each
re-run's stored levels, in the order of its value); :func:`tuner.study.record.records` puts them
on the trial's record, so ``best``, ``export``, the best at each load and the report read a mean
and a spread.

The spread of one configuration is the larger of the standard deviation of its runs and the
run-to-run noise the study knows (``noise``: the emulator's stated noise, or the largest
spread measured over the study's repeats): two or three runs alone can agree by chance. Two
configurations are *tied* when each mean lies within the other's spread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import sqrt
from statistics import fmean, stdev
from typing import Any

__all__ = ["Spread", "rank_of", "spread_of", "tied"]


@dataclass(frozen=True)
class Spread:
    """A figure over ``runs`` runs: its mean and its spread (one standard deviation)."""

    mean: float
    sd: float
    runs: int
    failed: int = 0  # re-runs that did not complete (a crash, a hang: the value is not theirs)

    @property
    def relative(self) -> float:
        return self.sd / self.mean if self.mean else 0.0

    def text(self, unit: str = "") -> str:
        """``4,578 +- 2.1% over 3 runs`` (one run: the figure alone)."""
        figure = f"{self.mean:,.0f}" if self.mean >= 100 else f"{self.mean:,.3g}"
        unit = f" {unit}" if unit else ""
        if self.runs < 2:
            return f"{figure}{unit}"
        failed = f", {self.failed} re-run(s) failed" if self.failed else ""
        return f"{figure}{unit} +- {self.relative:.1%} over {self.runs} runs{failed}"


def spread_of(value: float | None, repeats: Mapping[str, Any] | None, noise: float = 0.0) -> Spread | None:
    """The :class:`Spread` of a trial's ``value`` and its stored ``repeats`` (None: no value).

    ``noise``: the relative run-to-run noise known for the study; the spread is never below it.
    """
    values: Sequence[float] = [float(v) for v in (repeats or {}).get("values", [])] or (
        [float(value)] if value is not None else []
    )
    if not values:
        return None
    mean = fmean(values)
    measured = stdev(values) if len(values) > 1 else 0.0
    failed = len((repeats or {}).get("failed", []))
    return Spread(mean, max(measured, noise * mean), len(values), failed)


def tied(a: Spread, b: Spread) -> bool:
    """Whether each mean lies within the other's spread (the order cannot be told)."""
    return abs(a.mean - b.mean) <= min(a.sd, b.sd)


def rank_of(mean: float, runs: int, noise: float) -> tuple[float, float, int]:
    """What ranks a figure measured over ``runs`` runs: its ``mean`` less one standard error of
    that mean at the study's relative ``noise`` (``mean x noise / sqrt(runs)``), then the mean,
    then the runs (see :meth:`tuner.study.record.TrialRecord.rank`)."""
    return (mean * (1.0 - noise / sqrt(runs)), mean, runs)
