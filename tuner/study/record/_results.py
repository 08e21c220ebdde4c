"""Reading a study back: trials as plain records, the best stable trial, the baseline."""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Sequence
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.errors import ConfigError
from tuner.study.record._keys import (
    VALIDATION,
    CHOSEN_BY,
    CONFIG,
    FAILURE_DETAIL,
    FAILURE_REASON,
    IS_BASELINE,
    LEVELS,
    PRUNED_REASON,
    REUSED_FROM,
    REPEATS,
    STABLE,
)
from tuner.study.record._outcome import Outcome, outcome_of
from tuner.study.record._spread import Spread, spread_of

__all__ = ["TrialRecord", "records", "best_stable", "baseline_record", "stable_candidates"]


@dataclass(frozen=True)
class TrialRecord:
    """One trial as the reports and the CLI show it."""

    number: int
    state: str
    value: float | None
    params: dict[str, Any]
    config: dict[str, Any]
    is_baseline: bool
    stable: bool
    reason: str | None
    detail: str | None
    command_line: str | None
    levels: list[dict[str, Any]] = field(default_factory=list)
    user_attrs: dict[str, Any] = field(default_factory=dict)
    trial_id: int = -1
    reused_from: int | None = None
    outcome: Outcome = Outcome.WAITING  # what became of it (a reused trial: what it copied)
    chosen_by: str = ""  # why it was run (``sampler: tpe``, ``rule: ...``, ``baseline``)

    @property
    def throughput_by_level(self) -> dict[int, float]:
        return {lv["concurrency"]: lv["output_throughput"] for lv in self.levels}

    def spread(self, noise: float = 0.0) -> Spread | None:
        """Its value over its runs (the re-measures of :mod:`tuner.study.loop._confirm`, if any)."""
        return spread_of(self.value, self.user_attrs.get(REPEATS), noise)

    @property
    def mean_value(self) -> float | None:
        """The value, or its mean over the re-measured runs."""
        spread = self.spread()
        return spread.mean if spread is not None else None




def _record(trial: FrozenTrial, validations: dict[str, Any], repeats: dict[str, Any]) -> TrialRecord:
    ua = dict(trial.user_attrs)
    if str(trial.number) in validations:
        ua[VALIDATION] = validations[str(trial.number)]
    if str(trial.number) in repeats:  # a finished trial's attributes are closed: kept on the study
        ua[REPEATS] = repeats[str(trial.number)]
    reason = ua.get(FAILURE_REASON) or ua.get(PRUNED_REASON)
    return TrialRecord(
        number=trial.number,
        state=trial.state.name,
        value=trial.values[0] if trial.state == TrialState.COMPLETE and trial.values else None,
        params=dict(trial.params),
        config=dict(ua.get(CONFIG, {})),
        is_baseline=bool(ua.get(IS_BASELINE)),
        stable=bool(ua.get(STABLE)) and trial.state == TrialState.COMPLETE,
        reason=reason,
        detail=ua.get(FAILURE_DETAIL),
        command_line=ua.get("command_line"),
        levels=list(ua.get(LEVELS, [])),
        user_attrs=dict(ua),
        trial_id=trial._trial_id,
        reused_from=ua.get(REUSED_FROM),
        outcome=outcome_of(trial, follow_reuse=True),
        chosen_by=str(ua.get(CHOSEN_BY) or ("baseline" if ua.get(IS_BASELINE) else "")),
    )


def records(study: optuna.Study) -> list[TrialRecord]:
    """Every trial of the study, in order."""
    study_attrs = study.user_attrs
    validations, repeats = study_attrs.get(VALIDATION, {}), study_attrs.get(REPEATS, {})
    return [_record(t, validations, repeats) for t in study.get_trials(deepcopy=False)]


def best_stable(study: optuna.Study, *, prefer_validated: bool = True) -> TrialRecord:
    """The best COMPLETE trial whose every level ran clean (validated ones first, if any); a
    re-measured trial counts by its mean over its runs.

    Raises:
        ConfigError: no stable trial yet.
    """
    stable = [r for r in records(study) if r.stable and r.value is not None]
    stable = [r for r in stable if r.user_attrs.get("validation", {}).get("stable", True)]
    if prefer_validated:
        validated = [r for r in stable if r.user_attrs.get("validation", {}).get("stable")]
        if validated:
            stable = validated
    if not stable:
        raise ConfigError(f"study {study.study_name!r} has no stable completed trial yet; fix: run `tuner optimize`")
    return max(stable, key=lambda r: r.mean_value or 0.0)


def baseline_record(study: optuna.Study) -> TrialRecord | None:
    """The baseline trial, if it ran."""
    for record in records(study):
        if record.is_baseline and record.state in ("COMPLETE", "FAIL"):
            return record
    return None


def stable_candidates(records: Sequence[TrialRecord]) -> list[TrialRecord]:
    """Trials that ran every level clean, did not fail a soak, and are not copies."""
    return [
        r for r in records
        if r.stable and r.value is not None and r.reused_from is None
        and r.user_attrs.get(VALIDATION, {}).get("stable", True)
    ]
