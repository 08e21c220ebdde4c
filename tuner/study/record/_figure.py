"""The one rule that turns a trial's levels into its figure: :func:`trial_figure`.

Every trial of a study is ranked by the same rule, so no two are compared on different levels:

- **Every level counts.** The trial's figure is the best ``metric`` over all its clean levels
  (run to their end, at most ``max_failed_fraction`` failed) that meet the SLOs. A level the
  client could not fully drive is not dropped: the server served at least what was counted, so
  its figure stands as a **lower bound**. Taken in a maximum, a bound can lift a trial's figure
  but never sink it; a trial is never ranked on a lower level because a higher one was flagged.
- **A degree, not a verdict.** A level the client flagged (``measurement_bound``) is judged by
  how much its shortfall moves its figure: the server saw ``in_flight`` requests on average
  where ``c`` were asked, and the trial's own throughput-vs-concurrency slope from its two
  nearest levels measured without a shortfall (``e = d ln T / d ln c``, in [0, 1]) says that driving it fully would
  have read ``(c / in_flight) ** e - 1`` more. Within :data:`EXACT_WITHIN` (1%, half the 2% a
  real restart differs by) the level counts as measured; beyond it, as a bound.
- **A bound's latencies are not exact.** A study with SLOs or a latency to minimise leaves a
  bound level out (its latencies were read by a client that under-drove the server); a
  throughput study keeps its figure as a bound.

The trial runner's value, the pruner, each run's figure in a re-measure, the study's noise,
``tuner best --at``, the report and ``tuner bench`` all read this module.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.study.record._level import Level

__all__ = [
    "EXACT_WITHIN",
    "LevelFigure",
    "TrialFigure",
    "as_level",
    "figures_by_level",
    "shortfall_effect",
    "trial_figure",
]

EXACT_WITHIN = 0.01

_REQUIRED = (
    "num_requests",
    "completed",
    "failed",
    "duration_s",
    "input_tokens",
    "output_tokens",
    "output_throughput",
    "total_throughput",
    "request_throughput",
)


@dataclass(frozen=True)
class LevelFigure:
    """One level's figure under the rule.

    ``bound``: the figure is a lower bound (the client's shortfall moves it by more than
    :data:`EXACT_WITHIN`); ``effect``: how much more a fully driven level would read (None:
    unknown, a level stored before the client counted its requests in flight); ``in_flight``:
    the time-averaged requests the server saw (None: not known)."""

    concurrency: int
    value: float
    bound: bool = False
    effect: float | None = 0.0
    in_flight: float | None = None
    level: Level | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class TrialFigure:
    """A trial's figure: ``value`` (None: no level counted) at ``concurrency``, a lower bound
    when ``bound``; ``latency``: the ``minimize`` latency at that level; ``stable``: every level
    ran clean; ``levels``: each counted level's :class:`LevelFigure`."""

    value: float | None
    concurrency: int | None = None
    bound: bool = False
    latency: float | None = None
    stable: bool = False
    levels: dict[int, LevelFigure] = field(default_factory=dict)

    @property
    def bound_levels(self) -> tuple[int, ...]:
        """The levels whose figure is a lower bound."""
        return tuple(sorted(c for c, f in self.levels.items() if f.bound))


def _clean(level: Level, max_failed_fraction: float) -> bool:
    total = level.completed + level.failed
    return level.stop_reason is None and level.failed <= max_failed_fraction * max(1, total)


def _in_flight(level: Level) -> float | None:
    """The requests the server saw in flight on average: the client's count, else read from
    the late share a client stored before it counted them."""
    if level.in_flight is not None:
        return float(level.in_flight)
    late = (level.client_health or {}).get("late_share")
    if late is None:
        return None
    return level.concurrency * (1.0 - float(late))


def shortfall_effect(concurrency: int, in_flight: float | None, slope: float) -> float | None:
    """How much more a level would read driven at ``concurrency`` than at ``in_flight``, for a
    throughput that grows as ``c ** slope`` there (None: ``in_flight`` unknown)."""
    if in_flight is None:
        return None
    seen = min(float(concurrency), max(float(in_flight), 1e-9))
    return (concurrency / seen) ** min(1.0, max(0.0, slope)) - 1.0


def _slope(concurrency: int, exact: Mapping[int, float]) -> float:
    """The elasticity of the figure with concurrency near ``concurrency``, from the two nearest
    levels measured without a shortfall below it (else above it): a flagged level's own figure
    is what is in doubt, so it never sets its slope. On a curve that flattens as it rises,
    the slope below is the steeper one: the judgement errs towards a bound. 1 (proportional,
    the most a shortfall can move a figure) without two such levels."""
    below = sorted(c for c in exact if c < concurrency and exact[c] > 0)[-2:]
    above = sorted(c for c in exact if c > concurrency and exact[c] > 0)[:2]
    pair = below if len(below) == 2 else above if len(above) == 2 else None
    if pair is None:
        return 1.0
    low, high = pair
    return min(1.0, max(0.0, math.log(exact[high] / exact[low]) / math.log(high / low)))


def figures_by_level(
    levels: Sequence[Level], metric: str, max_failed_fraction: float
) -> dict[int, LevelFigure]:
    """Each clean level's :class:`LevelFigure` (a goodput study's rate levels: the highest rate
    that met the SLO stands for its concurrency, as :func:`clean_levels` reads it)."""
    raw: dict[int, tuple[float, Level]] = {}
    for level in levels:
        if not _clean(level, max_failed_fraction):
            continue
        figure = level.figure(metric)
        if figure is None:
            if not level.meets_slo or level.request_rate is None:
                continue
            figure = level.request_rate
        c = int(level.concurrency)
        if c not in raw or float(figure) > raw[c][0]:
            raw[c] = (float(figure), level)
    exact = {c: v for c, (v, level) in raw.items() if not level.measurement_bound}
    out: dict[int, LevelFigure] = {}
    for c, (value, level) in raw.items():
        if not level.measurement_bound:
            out[c] = LevelFigure(c, value, False, 0.0, level.in_flight, level)
            continue
        in_flight = _in_flight(level)
        effect = shortfall_effect(c, in_flight, _slope(c, exact))
        bound = effect is None or effect > EXACT_WITHIN
        out[c] = LevelFigure(c, value, bound, effect, in_flight, level)
    return out


def trial_figure(
    levels: Sequence[Level] | Sequence[Mapping[str, Any]],
    metric: str = "output_throughput",
    max_failed_fraction: float = 0.01,
    slo: Any = None,
    minimize: str | None = None,
) -> TrialFigure:
    """The trial's figure by the rule of the module docstring.

    Args:
        levels: its levels, typed or as stored.
        metric: the level figure ranked (``output_throughput``, ``tokens_per_joule``, ...).
        max_failed_fraction: a level with more failed requests is not clean.
        slo: the objective's SLO (``objective.slo``: ``unmet(level)``, ``empty``), or None.
        minimize: the latency of a multi-objective study, reported at the chosen level.
    """
    typed = tuple(as_level(level) for level in levels)
    stable = bool(typed) and all(_clean(level, max_failed_fraction) for level in typed)
    figures = figures_by_level(typed, metric, max_failed_fraction)
    judges_latency = minimize is not None or (slo is not None and not slo.empty)
    counted: dict[int, LevelFigure] = {}
    for c, figure in figures.items():
        if figure.bound and judges_latency:
            continue  # its latencies were read by a client that under-drove the server
        if slo is not None and figure.level is not None and slo.unmet(figure.level.to_dict()):
            continue
        if minimize is not None and (
            figure.level is None or getattr(figure.level, minimize, None) is None
        ):
            continue
        counted[c] = figure
    if not counted:
        return TrialFigure(None, stable=stable, levels=figures)
    # the highest figure; between equal figures, a measured one before a bound
    best = max(counted.values(), key=lambda f: (f.value, not f.bound))
    latency = float(getattr(best.level, minimize)) if minimize and best.level is not None else None
    return TrialFigure(best.value, best.concurrency, best.bound, latency, stable, figures)


def as_level(level: Level | Mapping[str, Any]) -> Level:
    """A level typed; a stored one with only some of the client's figures (a hand-written
    test level, a partial record) gets zeros for the rest, which the rule does not read."""
    if isinstance(level, Level):
        return level
    document = dict(level)
    for name in _REQUIRED:
        document.setdefault(name, 0)
    return Level.from_dict(document)
