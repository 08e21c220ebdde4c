"""What became of a trial: the typed :class:`Outcome` read back, and the one writer of outcomes.

The trial code returns a :class:`TrialOutcome` (Optuna's state, COMPLETE, PRUNED or FAIL, with the
reason class as a field); :func:`write_outcome` is the one place it is written to the study (the
attributes of :func:`outcome_attrs`, then ``study.tell``). A dead worker's trial, found by another
worker, gets the same attributes through the storage (:func:`write_dead_worker`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState

from tuner.errors import ServerFailure
from tuner.failures import FailureClass
from tuner.study.record._keys import (
    FAILURE_DETAIL,
    FAILURE_EXCERPT,
    FAILURE_NOTICED_AT,
    FAILURE_REASON,
    LEVELS,
    PRUNED_BY,
    PRUNED_REASON,
    REUSED_ATTRS,
    REUSED_FROM,
)
from tuner.study.record._write import store, store_level_figures

__all__ = [
    "Outcome",
    "outcome_of",
    "PRUNED_CLASSES",
    "reusable_failure",
    "TrialOutcome",
    "outcome_attrs",
    "write_outcome",
    "write_dead_worker",
]


class Outcome(str, Enum):
    """What became of a trial, beyond Optuna's state.

    PRUNED has three meanings (stopped below the baseline, skipped by a constraint, skipped by
    the feasibility gate) and FAIL two (the configuration is to blame, or the run was: Ctrl-C,
    host trouble, a dead worker); a trial that copied an earlier identical one is REUSED.
    """

    COMPLETE = "complete"
    BELOW_BASELINE = "below-baseline"  # PRUNED: ran, stayed below the baseline
    CONSTRAINT = "constraint"  # PRUNED: skipped by a constraint, not run
    GATED = "gated"  # PRUNED: skipped by the feasibility gate, not run
    REUSED = "reused"  # copied the result of an earlier identical configuration
    FAILED = "failed"  # FAIL by its configuration (would fail again)
    RUN_FAILED = "run-failed"  # FAIL by the run (interrupted, host-error, worker-died)
    RUNNING = "running"
    WAITING = "waiting"

    @property
    def ran(self) -> bool:
        """Whether the configuration ran on the host in this trial (and so says something)."""
        return self in (Outcome.COMPLETE, Outcome.BELOW_BASELINE, Outcome.FAILED)

    @property
    def pruned_by(self) -> str | None:
        """The stored ``pruned_by`` of a PRUNED outcome."""
        return _PRUNED_BY.get(self)


# The stored ``pruned_by`` values (kept as they were, so older studies read the same).
_PRUNED_BY = {
    Outcome.BELOW_BASELINE: "baseline",
    Outcome.CONSTRAINT: "constraint",
    Outcome.GATED: "feasibility",
}
_BY_PRUNED = {text: outcome for outcome, text in _PRUNED_BY.items()}
PRUNED_CLASSES = tuple(_BY_PRUNED)


def reusable_failure(reason: str | None) -> bool:
    """True when a FAIL with this stored reason would fail again (its :class:`FailureClass`
    blames the configuration): reuse it instead of rerunning."""
    failure_class = FailureClass.of(reason)
    return failure_class is not None and failure_class.blamed


def outcome_of(trial: FrozenTrial, *, follow_reuse: bool = False) -> Outcome:
    """The trial's :class:`Outcome` (the one place that reads the stored strings).

    ``follow_reuse``: a reused trial gets the outcome it copied instead of REUSED.
    """
    ua = trial.user_attrs
    if ua.get(REUSED_FROM) is not None and not follow_reuse and trial.state.is_finished():
        return Outcome.REUSED
    if trial.state == TrialState.COMPLETE:
        return Outcome.COMPLETE
    if trial.state == TrialState.PRUNED:
        return _BY_PRUNED.get(str(ua.get(PRUNED_BY) or "baseline"), Outcome.BELOW_BASELINE)
    if trial.state == TrialState.FAIL:
        return Outcome.FAILED if reusable_failure(ua.get(FAILURE_REASON)) else Outcome.RUN_FAILED
    if trial.state == TrialState.RUNNING:
        return Outcome.RUNNING
    return Outcome.WAITING


@dataclass(frozen=True)
class TrialOutcome:
    """What the trial code decided: Optuna's ``state``, the reason class (``outcome``) and what
    goes with it. Made by the constructors below, written by :func:`write_outcome` only."""

    state: TrialState
    outcome: Outcome
    values: list[float] | None = None  # COMPLETE: the objective values
    reason: str | None = None  # FAIL: the failure class; PRUNED: why it was stopped or skipped
    detail: str | None = None  # FAIL: one line on it
    excerpt: str | None = None  # FAIL by the server: its log lines
    noticed_at: Any = None  # FAIL by the server: where it was noticed
    message: str | None = None  # the line the terminal shows
    earlier: FrozenTrial | None = field(default=None, repr=False)  # REUSED: the trial copied
    by_server: bool = (
        False  # FAIL noticed in the server (its excerpt and where, stored even if empty)
    )

    @classmethod
    def complete(cls, values: list[float]) -> TrialOutcome:
        return cls(TrialState.COMPLETE, Outcome.COMPLETE, values=list(values))

    @classmethod
    def pruned(cls, outcome: Outcome, reason: str) -> TrialOutcome:
        """PRUNED below the baseline, by a constraint or by the feasibility gate."""
        if outcome.pruned_by is None:
            raise ValueError(f"{outcome} is not a PRUNED outcome")
        return cls(TrialState.PRUNED, outcome, reason=reason, message=reason)

    @classmethod
    def server_failed(cls, failure: ServerFailure) -> TrialOutcome:
        """FAIL: the server crashed, hung, answered wrongly (its class in ``failure.reason``)."""
        outcome = Outcome.FAILED if failure.failure_class.blamed else Outcome.RUN_FAILED
        return cls(
            TrialState.FAIL,
            outcome,
            reason=failure.reason,
            detail=failure.detail,
            excerpt=failure.excerpt,
            noticed_at=failure.noticed_at,
            message=str(failure),
            by_server=True,
        )

    @classmethod
    def run_failed(cls, reason: FailureClass, detail: str) -> TrialOutcome:
        """FAIL by the run, not the configuration (``interrupted``, ``host-error``, ``worker-died``)."""
        return cls(
            TrialState.FAIL,
            Outcome.RUN_FAILED,
            reason=str(reason),
            detail=detail,
            message=f"{reason}: {detail}",
        )

    @classmethod
    def reused(cls, earlier: FrozenTrial) -> TrialOutcome:
        """The result of an earlier identical configuration, copied."""
        return cls(
            earlier.state,
            Outcome.REUSED,
            values=earlier.values,
            earlier=earlier,
            message=f"same as trial {earlier.number}: reused",
        )


def outcome_attrs(result: TrialOutcome) -> dict[str, Any]:
    """The attributes an outcome stores (a reused one: those of the trial it copies)."""
    if result.earlier is not None:
        copied = {
            k: result.earlier.user_attrs[k] for k in REUSED_ATTRS if k in result.earlier.user_attrs
        }
        return {**copied, REUSED_FROM: result.earlier.number}
    if result.state == TrialState.PRUNED:
        return {PRUNED_REASON: result.reason, PRUNED_BY: result.outcome.pruned_by}
    if result.state == TrialState.FAIL:
        found = {FAILURE_REASON: result.reason, FAILURE_DETAIL: result.detail}
        if result.by_server:
            found.update({FAILURE_EXCERPT: result.excerpt, FAILURE_NOTICED_AT: result.noticed_at})
        return found
    return {}


def write_outcome(study: optuna.Study, trial: optuna.Trial, result: TrialOutcome) -> None:
    """Write ``result`` to the study: its attributes, then Optuna's state (the one writer)."""
    for key, value in outcome_attrs(result).items():
        if key == REUSED_FROM and result.earlier is not None:
            for level in result.earlier.user_attrs.get(LEVELS, []):
                store_level_figures(trial, level)
        store(trial, key, value)
    if result.earlier is not None and len(study.directions) == 1:
        for step, value in result.earlier.intermediate_values.items():
            trial.report(value, step)
    if result.state == TrialState.COMPLETE:
        study.tell(trial, result.values)
    else:
        study.tell(trial, state=result.state)


def write_dead_worker(storage: BaseStorage, trial_id: int, detail: str) -> bool:
    """FAIL ``worker-died`` a trial another worker left RUNNING, through the storage; False when
    another worker finished it first."""
    for key, value in outcome_attrs(
        TrialOutcome.run_failed(FailureClass.WORKER_DIED, detail)
    ).items():
        storage.set_trial_user_attr(trial_id, key, value)
    return storage.set_trial_state_values(trial_id, state=TrialState.FAIL)
