"""The pruning rule: stop a trial only when the levels still to come could not overturn it.

A trial's value is its best clean level. The levels are measured from the top concurrency down
(:func:`measurement_order`: it also finds crashes under load sooner), and a trial is pruned only
when (1) at least two levels ran clean, (2) every level still to come is below all measured ones,
(3) the measured throughput rises with concurrency (so on a curve that rises to a peak and may
fall after it, the lower levels still to come cannot beat the lowest one measured), and (4) every
measured level is below the baseline's value by more than ``margin``, and (5) no measured
level is a lower bound (the client under-drove the server there: its true figure may be
higher, and a bound never sinks a trial). Comparing level by level from the bottom would kill
winners: the seeds' winner is slower than the baseline at 64 concurrent requests and 2.5x
faster at 256, and against a baseline capped at 64 requests, a configuration slower at 16 and
64 can be 1.1-2.6x faster at 512.

It reads the levels stored on the trials (``levels`` user attribute), so the same rule serves
single-objective studies, where Optuna calls :class:`BaselinePruner`, and multi-objective ones,
where Optuna allows no pruner and the trial runner calls :func:`should_prune_against_baseline`.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.pruners import BasePruner
from optuna.trial import FrozenTrial, TrialState

from tuner.study.record import IS_BASELINE, LEVELS, figures_by_level
from tuner.study.record._figure import as_level

__all__ = [
    "BaselinePruner",
    "measurement_order",
    "below_baseline",
    "clean_values",
    "should_prune_against_baseline",
]


def measurement_order(levels: list[int] | tuple[int, ...]) -> list[int]:
    """The order levels are measured in: the top concurrency first, then downwards."""
    return sorted(levels, reverse=True)


def below_baseline(
    values: dict[int, float],
    baseline: dict[int, float],
    margin: float,
    min_levels: int = 2,
    pending: tuple[int, ...] | list[int] | set[int] = (),
    baseline_value: float | None = None,
) -> bool:
    """True when the trial cannot come within ``margin`` of the baseline (see the module docstring).

    Args:
        values: the trial's clean levels so far, concurrency -> throughput.
        baseline: the baseline's clean levels.
        margin: the fraction below the baseline's value that counts as slower.
        min_levels: clean levels needed before pruning (never fewer than 2).
        pending: the levels still to be measured.
        baseline_value: the baseline's objective value (default: its best clean level).
    """
    if len(values) < max(2, min_levels) or not baseline:
        return False
    if pending and max(pending) > min(values):
        return False  # a higher level is still to come: it could be the trial's best
    order = sorted(values)
    rising = all(values[low] <= values[high] for low, high in zip(order, order[1:]))
    if pending and not rising:
        return False  # past its peak at the top: a lower level still to come may be higher
    reference = baseline_value if baseline_value is not None else max(baseline.values())
    return max(values.values()) < (1.0 - margin) * reference


def clean_values(
    levels: list[dict[str, Any]], metric: str, max_failed_fraction: float
) -> dict[int, float]:
    """``{concurrency: metric}`` of the levels that ran to their end with few failed requests
    (the study's one rule, :func:`tuner.study.record.figures_by_level`; a bound's figure as read)."""
    figures = figures_by_level([as_level(level) for level in levels], metric, max_failed_fraction)
    return {c: figure.value for c, figure in figures.items()}


def _has_bound(levels: list[dict[str, Any]], metric: str, max_failed_fraction: float) -> bool:
    """Whether a level's figure is only a lower bound (the client under-drove the server)."""
    figures = figures_by_level([as_level(level) for level in levels], metric, max_failed_fraction)
    return any(figure.bound for figure in figures.values())


def _baseline(study: optuna.Study) -> tuple[list[dict[str, Any]], float | None] | None:
    """The baseline's levels and objective value (None when it failed), once it ran."""
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        if frozen.user_attrs.get(IS_BASELINE) and frozen.user_attrs.get(LEVELS):
            value = (
                frozen.values[0] if frozen.state == TrialState.COMPLETE and frozen.values else None
            )
            return list(frozen.user_attrs[LEVELS]), value
    return None


def should_prune_against_baseline(
    study: optuna.Study,
    levels: list[dict[str, Any]],
    *,
    metric: str = "output_throughput",
    max_failed_fraction: float = 0.01,
    margin: float = 0.10,
    min_levels: int = 2,
    all_levels: tuple[int, ...] | list[int] | None = None,
) -> bool:
    """The rule itself, on the levels measured so far (False while no baseline has run).

    ``all_levels``: every level of the workload (the ones not in ``levels`` are still to come).
    """
    found = _baseline(study)
    if found is None:
        return False
    baseline_levels, baseline_value = found
    if _has_bound(levels, metric, max_failed_fraction):
        return False  # a lower bound below the baseline does not say the trial is below it
    measured = {int(level["concurrency"]) for level in levels}
    return below_baseline(
        clean_values(levels, metric, max_failed_fraction),
        clean_values(baseline_levels, metric, max_failed_fraction),
        margin,
        max(2, min_levels),
        pending=tuple(set(all_levels or ()) - measured),
        baseline_value=baseline_value,
    )


class BaselinePruner(BasePruner):
    """Prune a trial that is below the baseline trial by more than ``margin`` at every level.

    Args:
        margin: the fraction below the baseline that counts as slower (default 10%).
        min_levels: levels needed before pruning (at least 2: never the first level alone).
        metric: the level figure compared (output tokens/s by default).
        max_failed_fraction: levels with more failed requests are not compared.
        levels: every level of the workload (those a trial has not measured yet are still to
            come); None: unknown, judged on the levels measured so far.
    """

    def __init__(
        self,
        margin: float = 0.10,
        min_levels: int = 2,
        metric: str = "output_throughput",
        max_failed_fraction: float = 0.01,
        levels: tuple[int, ...] | list[int] | None = None,
    ) -> None:
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"margin must be in [0, 1), got {margin}")
        self.margin = margin
        self.min_levels = max(2, min_levels)
        self.metric = metric
        self.max_failed_fraction = max_failed_fraction
        self.levels = tuple(levels) if levels is not None else None

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        if trial.user_attrs.get(IS_BASELINE):
            return False
        return should_prune_against_baseline(
            study,
            list(trial.user_attrs.get(LEVELS, [])),
            metric=self.metric,
            max_failed_fraction=self.max_failed_fraction,
            margin=self.margin,
            min_levels=self.min_levels,
            all_levels=self.levels,
        )
