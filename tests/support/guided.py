"""Hand-made trial records and study views for the tests of the guided strategy, and the
space they are made in (``search_spaces/glm5.yaml``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from optuna.trial import TrialState

from tuner.space import load_space
from tuner.study.record import Outcome, StudyView, TrialRecord
from tuner.study.strategies import Change, Move, MoveKind

__all__ = ["record", "rule", "space", "step", "sweep", "variant", "view"]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def space() -> Any:
    return load_space(REPO / "search_spaces" / "glm5.yaml")


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


def step(move: Move) -> tuple[MoveKind, str | None, Any, Any]:
    """``(kind, parameter, was, value)`` of a one-change move."""
    return move.kind, move.parameter, move.changes[0].was, move.value


def variant(space: Any, options: dict[str, Any]) -> Any:
    """The guided strategy (seed 0) with ``bench/guided_variants.py``'s options: guided settings
    (``sweep.points``) or a variant not adopted (``cliff=said-full``, ``sweep_order=effect``)."""
    bench = str(REPO / "bench")
    if bench not in sys.path:
        sys.path.insert(0, bench)
    from guided_variants import guided_strategy

    return guided_strategy(space, 0, options)
