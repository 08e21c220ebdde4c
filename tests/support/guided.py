"""Hand-made study views for the guided strategy's tests: a trial record of a space's baseline
with some values changed, a view of records, the sweep's and a rule's moves."""

from __future__ import annotations

from typing import Any

from optuna.trial import TrialState

from tuner.study.record import Outcome, StudyView, TrialRecord
from tuner.study.strategies import Change, Move, MoveKind


def record(space: Any, number: int, changes: dict[str, Any], *, value: float | None = None,
           failure: str | None = None, observations: dict[str, float] | None = None,
           move: Move | None = None) -> TrialRecord:
    config = dict(space.config({**space.baseline, **changes}, drop_inactive=True))
    failed = failure is not None
    return TrialRecord(
        number=number,
        state=TrialState.FAIL if failed else TrialState.COMPLETE,
        config=config,
        outcome=Outcome.FAILED if failed else Outcome.COMPLETE,
        failure_reason=failure,
        clean={} if failed else {64: value * 0.5, 1024: value},
        value=None if failed else value,
        observations=observations or {},
        chosen_by=move.reason if move is not None else "",
        is_baseline=number == 0,
        config_key=space.config(config).key(),
        move=move,
    )


def view(*records: TrialRecord) -> StudyView:
    return StudyView(records, records[0])


def sweep(name: str, value: Any, *patches: str) -> Move:
    """The sweep's move ``name = value`` (with ``patches`` applied)."""
    return Move(MoveKind.SWEEP, (Change(name, value),), patches=patches)


def rule(rule_id: str, name: str, was: Any, value: Any) -> Move:
    """A rule's move of ``name`` from ``was`` to ``value``."""
    return Move(MoveKind.RULE, (Change(name, value, was),), rule=rule_id, detail="a rule fired")

