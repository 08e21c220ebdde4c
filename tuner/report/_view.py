"""A study read once for the report and the table: trials, the baseline, the best, level points.

Everything the figures need is derived here from what the trial loop stored (``TrialRecord`` from
:mod:`tuner.study.results` plus each trial's intermediate values), so the figure modules hold only
drawing code. A level counts as *clean* when the trial reported it to Optuna (the loop reports
exactly the levels that ran to their end within the failed-request limit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import optuna

from tuner.errors import ConfigError
from tuner.study.record import (
    EMULATED,
    FAILURE_REASON,
    TELEMETRY,
    VALIDATION,
    TrialRecord,
    best_stable,
    records,
)

__all__ = [
    "INACTIVE",
    "LevelPoint",
    "StudyView",
    "changes_from",
    "outcome_of",
    "read_study",
    "show_value",
    "sorted_labels",
]


@dataclass(frozen=True)
class LevelPoint:
    """One measured level of one trial: an operating point (throughput, latency, power)."""

    trial: int
    state: str
    concurrency: int
    output_throughput: float
    clean: bool
    p99_ttft_ms: float | None
    median_tpot_ms: float | None
    mean_power_w: float | None
    mean_util_pct: float | None
    power_limit_w: float | None


@dataclass(frozen=True)
class StudyView:
    """The study as the report shows it.

    Attributes:
        name: the study name.
        attrs: the study's user attributes (``emulated``, ``space_file``, ``engine``, ...).
        trials: every trial, in order.
        clean_levels: per trial number, the concurrency levels it reported to Optuna.
        baseline: the baseline trial, if it ran.
        best: the best stable trial (validated first), if any.
    """

    name: str
    attrs: dict[str, Any]
    trials: tuple[TrialRecord, ...]
    clean_levels: dict[int, dict[int, float]]
    baseline: TrialRecord | None
    best: TrialRecord | None

    @property
    def emulated(self) -> bool:
        """True when the study ran on the emulated host (its figures are labelled so)."""
        return bool(self.attrs.get("emulated")) or any(
            t.user_attrs.get(EMULATED) for t in self.trials
        )

    @property
    def label(self) -> str:
        """The suffix every emulated figure carries: `` (emulated)`` or nothing."""
        return " (emulated)" if self.emulated else ""

    @property
    def completed(self) -> list[TrialRecord]:
        """COMPLETE trials that ran on the host (reused copies left out), best first."""
        done = [t for t in self.trials if t.state == "COMPLETE" and t.value is not None]
        return sorted(
            (t for t in done if t.reused_from is None),
            key=lambda t: -(t.value or 0.0),
        )

    def top(self, count: int) -> list[TrialRecord]:
        """The ``count`` best completed trials other than the best and the baseline."""
        skip = {t.number for t in (self.best, self.baseline) if t is not None}
        return [t for t in self.completed if t.number not in skip][:count]

    def points(self) -> list[LevelPoint]:
        """Every measured level of every trial (reused copies left out)."""
        found: list[LevelPoint] = []
        for trial in self.trials:
            if trial.reused_from is not None:
                continue
            clean = self.clean_levels.get(trial.number, {})
            for level in trial.levels:
                gpu = (
                    level.get("gpu")
                    or trial.user_attrs.get(TELEMETRY, {}).get(str(level["concurrency"]))
                    or {}
                )
                found.append(
                    LevelPoint(
                        trial=trial.number,
                        state=trial.state,
                        concurrency=int(level["concurrency"]),
                        output_throughput=float(level.get("output_throughput") or 0.0),
                        clean=int(level["concurrency"]) in clean,
                        p99_ttft_ms=level.get("p99_ttft_ms"),
                        median_tpot_ms=level.get("median_tpot_ms"),
                        mean_power_w=gpu.get("mean_power_w"),
                        mean_util_pct=gpu.get("mean_util_pct"),
                        power_limit_w=gpu.get("power_limit_w"),
                    )
                )
        return found

    def state_counts(self) -> dict[str, int]:
        """How many trials ended in each state."""
        counts: dict[str, int] = {}
        for trial in self.trials:
            counts[trial.state] = counts.get(trial.state, 0) + 1
        return counts


def outcome_of(trial: TrialRecord) -> str:
    """A trial's outcome in a few words: ``ok``, ``pruned: baseline``, its failure reason, or
    ``unstable in soak`` when ``tuner validate`` found it broke under a long run."""
    if trial.state == "COMPLETE":
        if (trial.user_attrs.get(VALIDATION) or {}).get("stable") is False:
            return "unstable in soak"
        return "ok" if trial.stable or "stable" not in trial.user_attrs else "ok (unstable level)"
    if trial.state == "PRUNED":
        return f"pruned: {trial.outcome.pruned_by or 'baseline'}"
    if trial.state == "FAIL":
        return str(trial.user_attrs.get(FAILURE_REASON) or "failed")
    return trial.state.lower()


def read_study(study: optuna.Study) -> StudyView:
    """Read every trial of ``study`` once."""
    trials = tuple(records(study))
    clean = {t.number: dict(t.intermediate_values) for t in study.get_trials(deepcopy=False)}
    try:
        best: TrialRecord | None = best_stable(study)
    except ConfigError:
        best = None
    # A baseline that failed for a reason of the run (interrupted, host-error) runs again: the
    # completed one, if any, is the reference.
    baselines = [t for t in trials if t.is_baseline and t.state in ("COMPLETE", "FAIL")]
    baseline = next(
        (t for t in baselines if t.state == "COMPLETE"), baselines[0] if baselines else None
    )
    return StudyView(
        name=study.study_name,
        attrs=dict(study.user_attrs),
        trials=trials,
        clean_levels=clean,
        baseline=baseline,
        best=best,
    )


def changes_from(config: dict[str, Any], reference: dict[str, Any] | None) -> list[str]:
    """``name=value`` for each setting of ``config`` that differs from ``reference``.

    Without a reference, every setting.

    A setting absent from ``config`` (a conditional parameter that was not active) shows as
    ``inactive``; ``None`` (the flag left unset) as ``unset``.
    """
    if not reference:
        return [f"{k}={show_value(v)}" for k, v in config.items()]
    keys = list(config) + [k for k in reference if k not in config]
    return [
        f"{k}={show_value(config.get(k, INACTIVE))}"
        for k in keys
        if reference.get(k, INACTIVE) != config.get(k, INACTIVE)
    ]


def sorted_labels(labels: set[str]) -> list[str]:
    """Labels in reading order: numbers by value first, then text alphabetically."""
    return sorted(labels, key=lambda s: (not _is_number(s), float(s) if _is_number(s) else 0.0, s))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def show_value(value: Any) -> str:
    """A configuration value as text: ``unset`` for None, ``inactive`` for an inactive one."""
    if value is INACTIVE:
        return "inactive"
    return "unset" if value is None else str(value)


class _Inactive:
    def __repr__(self) -> str:
        return "inactive"


INACTIVE: Any = _Inactive()
