"""What the report draws from the study view: each measured level as a point, a trial's outcome in
a few words, and how configurations are shown.

The report reads the one study view (:func:`tuner.study.record.read_view`: the trials as typed
records, the baseline, the best stable trial), so the figure modules hold only drawing code. A
level counts as *clean* when the trial reported it to Optuna (the loop reports exactly the levels
that ran to their end within the failed-request limit): :attr:`TrialRecord.reported`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from optuna.trial import TrialState

from tuner.study.record import STABLE, TELEMETRY, StudyView, TrialRecord

__all__ = [
    "INACTIVE",
    "LevelPoint",
    "changes_from",
    "level_points",
    "outcome_text",
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


def level_points(view: StudyView) -> list[LevelPoint]:
    """Every measured level of every trial (reused copies left out)."""
    found: list[LevelPoint] = []
    for trial in view.records:
        if trial.reused_from is not None:
            continue
        for level in trial.levels:
            gpu = (
                level.gpu or trial.user_attrs.get(TELEMETRY, {}).get(str(level.concurrency)) or {}
            )
            found.append(
                LevelPoint(
                    trial=trial.number,
                    state=trial.state.name,
                    concurrency=int(level.concurrency),
                    output_throughput=float(level.output_throughput or 0.0),
                    clean=int(level.concurrency) in trial.reported,
                    p99_ttft_ms=level.p99_ttft_ms,
                    median_tpot_ms=level.median_tpot_ms,
                    mean_power_w=gpu.get("mean_power_w"),
                    mean_util_pct=gpu.get("mean_util_pct"),
                    power_limit_w=gpu.get("power_limit_w"),
                )
            )
    return found


def outcome_text(trial: TrialRecord) -> str:
    """A trial's outcome in a few words: ``ok``, ``pruned: baseline``, its failure reason, or
    ``unstable in soak`` when ``tuner validate`` found it broke under a long run."""
    if trial.state == TrialState.COMPLETE:
        if trial.soak_stable is False:
            return "unstable in soak"
        return "ok" if trial.stable or STABLE not in trial.user_attrs else "ok (unstable level)"
    if trial.state == TrialState.PRUNED:
        return f"pruned: {trial.result.pruned_by or 'baseline'}"
    if trial.state == TrialState.FAIL:
        return str(trial.failure_reason or "failed")
    return trial.state.name.lower()


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
