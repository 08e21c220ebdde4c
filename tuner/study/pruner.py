"""The pruning rule: a configuration that stays below the baseline at every level so far.

Stock median or percentile pruning at the first level would discard the seeds' winner, which is
slower than the baseline at 64 concurrent requests and 2.3x faster at 256. So this rule never
prunes on the first level alone, and prunes only when the trial is below the baseline by more than
``margin`` at *every* clean level measured so far. It reads the levels stored on the trials
(``levels`` user attribute), so the same rule serves single-objective studies, where Optuna calls
:class:`BaselinePruner`, and multi-objective ones, where Optuna allows no pruner and the trial
runner calls :func:`should_prune_against_baseline` itself.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.pruners import BasePruner
from optuna.trial import FrozenTrial, TrialState

from tuner.study import attrs

__all__ = [
    "BaselinePruner",
    "BASELINE_ATTR",
    "below_baseline",
    "clean_values",
    "should_prune_against_baseline",
]

BASELINE_ATTR = attrs.IS_BASELINE


def below_baseline(
    values: dict[int, float], baseline: dict[int, float], margin: float, min_levels: int = 2
) -> bool:
    """True when every shared level is more than ``margin`` below the baseline (>= min_levels)."""
    shared = [step for step in values if step in baseline]
    if len(shared) < min_levels:
        return False
    return all(values[s] < (1.0 - margin) * baseline[s] for s in shared)


def clean_values(levels: list[dict[str, Any]], metric: str, max_failed_fraction: float) -> dict[int, float]:
    """``{concurrency: metric}`` of the levels that ran to their end with few failed requests."""
    values = {}
    for level in levels:
        total = level["completed"] + level["failed"]
        if level.get("stop_reason") is None and level["failed"] <= max_failed_fraction * max(1, total):
            values[int(level["concurrency"])] = float(level[metric])
    return values


def _baseline_levels(study: optuna.Study) -> list[dict[str, Any]] | None:
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        if frozen.user_attrs.get(BASELINE_ATTR) and frozen.user_attrs.get("levels"):
            return list(frozen.user_attrs["levels"])
    return None


def should_prune_against_baseline(
    study: optuna.Study,
    levels: list[dict[str, Any]],
    *,
    metric: str = "output_throughput",
    max_failed_fraction: float = 0.01,
    margin: float = 0.10,
    min_levels: int = 2,
) -> bool:
    """The rule itself, on the levels measured so far (False while no baseline has run)."""
    baseline = _baseline_levels(study)
    if baseline is None:
        return False
    return below_baseline(
        clean_values(levels, metric, max_failed_fraction),
        clean_values(baseline, metric, max_failed_fraction),
        margin,
        max(2, min_levels),
    )


class BaselinePruner(BasePruner):
    """Prune a trial that is below the baseline trial by more than ``margin`` at every level.

    Args:
        margin: the fraction below the baseline that counts as slower (default 10%).
        min_levels: levels needed before pruning (at least 2: never the first level alone).
        metric: the level figure compared (output tokens/s by default).
        max_failed_fraction: levels with more failed requests are not compared.
    """

    def __init__(
        self,
        margin: float = 0.10,
        min_levels: int = 2,
        metric: str = "output_throughput",
        max_failed_fraction: float = 0.01,
    ) -> None:
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"margin must be in [0, 1), got {margin}")
        self.margin = margin
        self.min_levels = max(2, min_levels)
        self.metric = metric
        self.max_failed_fraction = max_failed_fraction

    def prune(self, study: optuna.Study, trial: FrozenTrial) -> bool:
        if trial.user_attrs.get(BASELINE_ATTR):
            return False
        return should_prune_against_baseline(
            study,
            list(trial.user_attrs.get("levels", [])),
            metric=self.metric,
            max_failed_fraction=self.max_failed_fraction,
            margin=self.margin,
            min_levels=self.min_levels,
        )
