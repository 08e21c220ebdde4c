"""Reading a study's results back: every trial, the best stable trial, the baseline."""

from __future__ import annotations

from collections.abc import Sequence

import optuna
from optuna.trial import TrialState

from tuner.errors import ConfigError
from tuner.study.record._record import TrialRecord
from tuner.study.record._view import read_view

__all__ = ["records", "best_stable", "baseline_record", "stable_candidates"]


def records(study: optuna.Study) -> list[TrialRecord]:
    """Every trial of the study, in order."""
    return list(read_view(study).records)


def best_stable(study: optuna.Study, *, prefer_validated: bool = True) -> TrialRecord:
    """The best COMPLETE trial whose every level ran clean (validated ones first, if any); a
    re-measured trial counts by its mean over its runs.

    Raises:
        ConfigError: no stable trial yet.
    """
    found = read_view(study).best_stable_of(prefer_validated=prefer_validated)
    if found is None:
        raise ConfigError(
            f"study {study.study_name!r} has no stable completed trial yet; fix: run `tuner optimize`"
        )
    return found


def baseline_record(study: optuna.Study) -> TrialRecord | None:
    """The baseline trial, if it ran (the first that completed or failed)."""
    for record in read_view(study).records:
        if record.is_baseline and record.state in (TrialState.COMPLETE, TrialState.FAIL):
            return record
    return None


def stable_candidates(records: Sequence[TrialRecord]) -> list[TrialRecord]:
    """Trials that ran every level clean, did not fail a soak, and are not copies."""
    return [
        r
        for r in records
        if r.stable
        and r.value is not None
        and r.reused_from is None
        and r.soak_stable is not False
    ]
