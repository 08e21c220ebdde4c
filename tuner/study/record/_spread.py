"""A configuration's figure over several runs: mean, spread, and when two are tied.

The winner's re-measures (:mod:`tuner.study.loop._confirm`) are read by trial number in the form
of :func:`tuner.study.record.repeats_of` (``{"7": {"values": [4612.0, 4540.3, 4581.1], "failed":
[], "levels": [[...], [...]]}}``: the trial's own value first, then each re-run's; ``levels``:
each re-run's stored levels, in the order of its value); :func:`tuner.study.record.read_view`
puts them on the trial's record, so ``best``, ``export``, the best at each load and the report
read a mean and a spread.

**Like for like.** Each run's figure is read at the same level: the level the trial's own
figure came from (:func:`tuner.study.record.trial_figure`), in every re-run that measured it
clean (a study written before re-runs kept their levels: each run's value). A run whose figure
there is a lower bound (the client under-drove the server) is counted in ``bound_runs``: such a
spread comes partly from the client, so it is never taken for the host's noise
(:mod:`tuner.study.record._noise`).

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

__all__ = ["RunFigure", "Spread", "lead_is_clear", "rank_of", "spread_of", "tied"]

CLEAR_LEAD_SE = 2.0  # a lead is told beyond this many standard errors of the difference


@dataclass(frozen=True)
class Spread:
    """A figure over ``runs`` runs: its mean and its spread (one standard deviation)."""

    mean: float
    sd: float
    runs: int
    failed: int = 0  # re-runs that did not complete (a crash, a hang: the value is not theirs)
    bound_runs: int = 0  # runs whose figure at the level is a lower bound (the client's shortfall)
    concurrency: int | None = None  # the level every run was read at (None: each run's value)

    @property
    def host_noise(self) -> bool:
        """Whether its spread may be taken for the host's run-to-run noise: two runs or more,
        none of them a lower bound."""
        return self.runs > 1 and self.bound_runs == 0

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
        bound = f", {self.bound_runs} a lower bound" if self.bound_runs else ""
        return f"{figure}{unit} +- {self.relative:.1%} over {self.runs} runs{failed}{bound}"


@dataclass(frozen=True)
class RunFigure:
    """One run's figure at the level a spread reads (``bound``: a lower bound there)."""

    value: float
    bound: bool = False


def spread_of(
    value: float | None,
    repeats: Mapping[str, Any] | None,
    noise: float = 0.0,
    at_level: Sequence[RunFigure] | None = None,
    concurrency: int | None = None,
) -> Spread | None:
    """The :class:`Spread` of a trial's ``value`` and its stored ``repeats`` (None: no value).

    ``noise``: the relative run-to-run noise known for the study; the spread is never below it.
    ``at_level``: each run's figure at one level (``concurrency``), like for like (see the
    module docstring); without it, each run's stored value.
    """
    failed = len((repeats or {}).get("failed", []))
    if at_level:
        level_values = [run.value for run in at_level]
        mean = fmean(level_values)
        measured = stdev(level_values) if len(level_values) > 1 else 0.0
        return Spread(
            mean,
            max(measured, noise * mean),
            len(level_values),
            failed,
            sum(run.bound for run in at_level),
            concurrency,
        )
    values: Sequence[float] = [float(v) for v in (repeats or {}).get("values", [])] or (
        [float(value)] if value is not None else []
    )
    if not values:
        return None
    mean = fmean(values)
    measured = stdev(values) if len(values) > 1 else 0.0
    return Spread(mean, max(measured, noise * mean), len(values), failed)


def tied(a: Spread, b: Spread) -> bool:
    """Whether each mean lies within the other's spread (the order cannot be told)."""
    return abs(a.mean - b.mean) <= min(a.sd, b.sd)


def lead_is_clear(best: Spread, second: Spread) -> bool:
    """Whether ``best`` leads ``second`` by more than :data:`CLEAR_LEAD_SE` standard errors of
    the difference of their means (each run's spread ``sd``, its mean's ``sd / sqrt(runs)``):
    at 2.2% noise and one run each, 6.2%; three runs each, 3.6%."""
    error = sqrt(best.sd**2 / max(1, best.runs) + second.sd**2 / max(1, second.runs))
    return best.mean - second.mean > CLEAR_LEAD_SE * error


def rank_of(mean: float, runs: int, noise: float) -> tuple[float, float, int]:
    """What ranks a figure measured over ``runs`` runs: its ``mean`` less one standard error of
    that mean at the study's relative ``noise`` (``mean x noise / sqrt(runs)``), then the mean,
    then the runs (see :meth:`tuner.study.record.TrialRecord.rank`)."""
    return (mean * (1.0 - noise / sqrt(runs)), mean, runs)
