"""The guided strategy on a server whose log says nothing of its batch or its KV pool (issue 28.3):
memory that held at a small batch is not taken for memory that holds a large one, the memory
cliff and a shaped memory's sweep do not walk up and down a flat curve, and the first sweep does
not undo a change that paid. Hand-made views of glm5.yaml's space."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tuner.space import load_space
from tuner.study.strategies import Change, Move, MoveKind
from tuner.study.strategies.guided import GuidedSettings, GuidedStrategy, cliff_bracket
from tuner.study.strategies.guided._cliff import CliffProposer
from tuner.study.strategies.guided._common import grid, running_batch
from tuner.study.strategies.guided._proposer import Round
from tuner.study.strategies.guided._sweep import SweepProposer
from tests.support.guided import record, rule, sweep, view

REPO = Path(__file__).resolve().parents[4]
CAP = "max_running_requests"
MEM = "mem_fraction_static"


@pytest.fixture(scope="module")
def space() -> Any:
    return load_space(REPO / "search_spaces" / "glm5.yaml")


def _raised_cap_study(space: Any) -> tuple[Any, ...]:
    """Issue 28's held-out server, no log: the baseline (cap 64) held at 0.92; the cap raised to
    1,024 ran out of memory under load at 0.92; its repair held at 0.90."""
    baseline = record(space, 0, {}, value=500.0)
    raised = record(space, 1, {CAP: 1024}, failure="unstable-at-1024",
                    move=rule("client-cap-binds", CAP, 64, 1024))
    repaired = record(space, 2, {CAP: 1024, MEM: 0.9}, value=1500.0,
                      move=Move(MoveKind.REPAIR, (Change(MEM, 0.9, 0.92),), trial=1))
    return baseline, raised, repaired


def test_memory_that_held_at_the_baselines_small_batch_is_not_held_for_a_large_one(space: Any) -> None:
    baseline, raised, repaired = _raised_cap_study(space)
    study = view(baseline, raised, repaired)
    # no log: the client's levels and the cap bound the batch (64 for the baseline, 1,024 raised)
    assert running_batch(baseline, CAP) == 64 and running_batch(repaired, CAP) == 1024
    assert running_batch(repaired) is None  # nothing logged
    values = grid(space.parameters[MEM])
    bracket = cliff_bracket(study, MEM, values, running_batch(repaired, CAP), CAP)
    assert (bracket.held, bracket.failed, bracket.inside) == (0.9, 0.92, [0.91])
    # without the bound 0.92 "held" at 64 running, and 0.92 would be proposed again from every
    # best: out of memory under load each time (tuning seed 14: six trials)
    assert cliff_bracket(study, MEM, values, None).held == 0.92
    strategy = GuidedStrategy(space, 0)
    moves = [c.move for c in CliffProposer(strategy.plan).candidates(Round(study, repaired))]
    assert [(m.kind, m.parameter, m.value) for m in moves] == [(MoveKind.CLIFF, MEM, 0.91)]


def test_the_cliff_moves_the_best_back_up_to_what_held_once(space: Any) -> None:
    baseline, raised, repaired = _raised_cap_study(space)
    oom = record(space, 3, {CAP: 1024, MEM: 0.91}, failure="unstable-at-1024",
                 move=Move(MoveKind.CLIFF, (Change(MEM, 0.91, 0.9),)))
    back = record(space, 4, {CAP: 1024, MEM: 0.9, "radix_cache": False}, value=1550.0,
                  move=Move(MoveKind.CLIFF, (Change(MEM, 0.9, 0.88),)))
    lower = record(space, 5, {CAP: 1024, MEM: 0.88, "radix_cache": False}, value=1600.0, move=sweep(MEM, 0.88))
    study = view(baseline, raised, repaired, oom, back, lower)

    plan = GuidedStrategy(space, 0).plan
    # the best went below 0.90 and measured as fast there: the cliff moved it back up once already
    assert list(CliffProposer(plan).candidates(Round(study, lower))) == []
    # from a best the cliff has not moved back up yet, it does
    first_back = view(baseline, raised, repaired, oom, lower)
    moves = [c.move for c in CliffProposer(plan).candidates(Round(first_back, lower))]
    assert [(m.kind, m.parameter, m.value) for m in moves] == [(MoveKind.CLIFF, MEM, 0.9)]


def test_a_shaped_memory_is_swept_one_step_below_once(space: Any) -> None:
    baseline, raised, repaired = _raised_cap_study(space)
    below = record(space, 3, {CAP: 1024, MEM: 0.89}, value=1510.0, move=Move(MoveKind.SWEEP, (Change(MEM, 0.89, 0.9),)))
    study = view(baseline, raised, repaired, below)

    def memory(seen: Any) -> list[Any]:
        plan = GuidedStrategy(space, 0).plan
        return [c.move.value for c in SweepProposer(plan).candidates(Round(seen, below)) if c.move.parameter == MEM]

    # from the new best at 0.89, one more step down (0.88) would walk down a flat curve
    assert 0.88 not in memory(study)
    # the first step below is swept: from a best no sweep has moved down yet
    assert 0.88 in memory(view(baseline, raised, repaired, replace(below, move=None)))


def test_the_first_sweep_does_not_undo_a_change_that_paid(space: Any) -> None:
    top = {CAP: 1024}
    base = record(space, 0, top, value=2000.0)
    paid = record(space, 1, {**top, "radix_cache": False}, value=2200.0, move=sweep("radix_cache", False))
    study = view(base, paid)

    def swept(again: bool = False) -> set[tuple[str, Any]]:
        plan = GuidedStrategy(space, 0).plan
        return {(c.move.parameter, c.move.value) for c in SweepProposer(plan, again).candidates(Round(study, paid))}

    assert ("radix_cache", True) not in swept()
    assert ("radix_cache", True) in swept(again=True)  # the second sweep may
