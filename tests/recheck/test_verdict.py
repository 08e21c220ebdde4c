"""The recheck's choice of configurations, its order, and its verdict, as pure functions over
typed records (tuner/recheck/_plan.py, _verdict.py)."""

from __future__ import annotations

from optuna.trial import TrialState

from tuner.recheck import (
    Break,
    BreakKind,
    Commands,
    Role,
    VerdictKind,
    choose_subjects,
    interleaved,
    verdict,
)
from tuner.recheck._plan import Subject
from tuner.study.record import ENGINE_VERSION, REPEATS, Outcome, StudyView, TrialRecord

COMMANDS = Commands("glm5.yaml", "glm5", "glm5-recheck-0.5.10", "--emulate")


def _old(number: int, value: float, config: dict, *, baseline: bool = False) -> TrialRecord:
    return TrialRecord(number, TrialState.COMPLETE, config, Outcome.COMPLETE, value=value, stable=True,
                       is_baseline=baseline, config_key=repr(sorted(config.items())),
                       user_attrs={ENGINE_VERSION: "0.5.9"})


def _now(number: int, runs: list[float]) -> TrialRecord:
    return TrialRecord(number, TrialState.COMPLETE, {}, Outcome.COMPLETE, value=runs[0], stable=True,
                       user_attrs={ENGINE_VERSION: "0.5.10", REPEATS: {"values": runs, "failed": []}})


def _subjects() -> list[Subject]:
    return [Subject(Role.BASELINE, _old(0, 900.0, {"a": 0}, baseline=True), 0),
            Subject(Role.WINNER, _old(5, 3660.0, {"a": 1}), 1),
            Subject(Role.NEXT, _old(8, 3600.0, {"a": 2}), 2)]


def test_the_baseline_the_winner_and_the_next_distinct_ones_run_in_rounds() -> None:
    records = (_old(0, 900.0, {"a": 0}, baseline=True), _old(1, 3000.0, {"a": 1}), _old(2, 3500.0, {"a": 2}),
               _old(3, 3500.0, {"a": 2}), _old(4, 3200.0, {"a": 3}))
    view = StudyView(records, records[0], "s")
    subjects = choose_subjects(view, top=3)
    assert [(s.role, s.record.number) for s in subjects] == [
        (Role.BASELINE, 0), (Role.WINNER, 2), (Role.NEXT, 4), (Role.NEXT, 1)]  # trial 3 repeats trial 2
    order = interleaved(subjects[:2], runs=2)
    assert [(r, s.record.number) for r, s in order] == [(0, 0), (0, 2), (1, 0), (1, 2)]


def test_the_winner_still_leads() -> None:
    now = {0: _now(0, [880.0, 870.0]), 5: _now(5, [3600.0, 3650.0]), 8: _now(8, [3500.0, 3520.0])}
    found = verdict(_subjects(), now, [], 0.02, COMMANDS)
    assert found.kind == VerdictKind.STILL_WINS and found.leader.record.number == 5
    assert "against the baseline (beyond noise)" in found.lines[0]
    assert any("-1.0% against its figure then (0.5.9" in line and "within noise" in line for line in found.lines)


def test_lost_its_lead_beyond_noise_names_the_leader_and_its_export() -> None:
    now = {0: _now(0, [880.0, 870.0]), 5: _now(5, [3200.0, 3250.0]), 8: _now(8, [3600.0, 3620.0])}
    found = verdict(_subjects(), now, [], 0.02, COMMANDS)
    assert found.kind == VerdictKind.LOST_LEAD and found.leader.record.number == 8
    assert "#2 (trial 8) leads now" in found.lines[0] and "+11.9%" in found.lines[0]
    assert found.lines[0].endswith("beyond noise")
    assert any("tuner export glm5.yaml --study-name glm5 --trial 8 --out launch.sh --emulate" in line
               for line in found.lines)


def test_lost_its_lead_within_noise_keeps_the_export() -> None:
    now = {0: _now(0, [880.0, 870.0]), 5: _now(5, [3590.0, 3600.0]), 8: _now(8, [3610.0, 3620.0])}
    found = verdict(_subjects(), now, [], 0.02, COMMANDS)
    assert found.kind == VerdictKind.LOST_LEAD and "within noise" in found.lines[0]
    assert any("the export can stay" in line and "--runs 4" in line for line in found.lines)


def test_a_winner_the_version_cannot_launch_or_that_crashes_can_no_longer_run() -> None:
    renamed = Break(BreakKind.UNKNOWN_FLAG, "--cuda-graph-max-bs", "unknown in 0.5.10", (5,))
    now = {0: _now(0, [880.0, 870.0]), 5: None, 8: _now(8, [3500.0, 3520.0])}
    found = verdict(_subjects(), now, [renamed], 0.02, COMMANDS)
    assert found.kind == VerdictKind.CANNOT_RUN and "unknown flag --cuda-graph-max-bs" in found.lines[0]
    assert "the best that runs is #2 (trial 8)" in found.lines[1]
    assert "--from-study glm5" in found.lines[2]
    crashed = TrialRecord(5, TrialState.FAIL, {}, Outcome.FAILED, failure_reason="oom-at-start",
                          detail="CUDA out of memory")
    found = verdict(_subjects(), {**now, 5: crashed}, [], 0.02, COMMANDS)
    assert found.kind == VerdictKind.CANNOT_RUN and "oom-at-start: CUDA out of memory" in found.lines[0]
