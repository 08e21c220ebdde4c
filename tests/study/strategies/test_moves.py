"""Moves as data: a move round-trips through the JSON stored on its trial, the view reads it back
typed, a retry keeps it, and a trial of a study written before moves were stored (``chosen_by``
only) is read by the one legacy adapter into the move that renders the same text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from tuner.space import load_space
from tuner.study.record import CHOSEN_BY, CONFIG, CONFIG_KEY, MOVE, RETRY_OF, read_view
from tuner.study.storage import retry_later
from tuner.study.strategies import Change, Move, MoveKind, Signal, Source, read_move
from tuner.study.strategies._legacy_moves import legacy_move
from tuner.study.strategies._moves import value_key

REPO = Path(__file__).resolve().parents[3]
optuna.logging.set_verbosity(optuna.logging.WARNING)

MOVES = [
    Move(MoveKind.RULE, (Change("max_running_requests", 1024, 64),),
         rule="running_req_at_cap_fraction -> raise --max-running-requests",
         signal=Signal("running_req_at_cap_fraction", 0.95, Source.SERVER_LOG),
         detail="cap binds at 64 (#running-req = 64 for 95% of the level)"),
    Move(MoveKind.RULE, (Change("cuda_graph_max_bs", 512, None),), rule="eager_fraction -> raise --cuda-graph-max-bs",
         signal=Signal("eager_fraction", 1.0, Source.SERVER_LOG), detail="decode runs without CUDA graphs"),
    Move(MoveKind.REPAIR, (Change("mem_fraction_static", 0.9, 0.92),), rule="saturating-below-top",
         signal=Signal("failure_reason", "unstable-at-1024", Source.OUTCOME), trial=1),
    Move(MoveKind.CLIFF, (Change("mem_fraction_static", 0.93, 0.92),),
         signal=Signal("token_usage_max", None, Source.SERVER_LOG), detail="bracket 0.92-0.95"),
    Move(MoveKind.SWEEP, (Change("moe_runner_backend", "flashinfer_cutlass", "auto"),), patches=("autotune_gate",)),
    Move(MoveKind.SWEEP, (Change("radix_cache", False, True),)),
    Move(MoveKind.MODEL, (Change("kv_cache_dtype", "bf16"), Change("chunked_prefill_size", None, 8192)),
         detail="31 trials near the best, expects +3.2%"),
    Move(MoveKind.COMBINE, (Change("chunked_prefill_size", 4096, gain=1.03), Change("radix_cache", False, gain=1.02))),
]


@pytest.fixture(scope="module")
def space() -> Any:
    return load_space(REPO / "search_spaces" / "glm5.yaml")


@pytest.mark.parametrize("move", MOVES, ids=lambda m: m.kind.value)
def test_a_move_round_trips_through_the_json_stored_on_its_trial(move: Move) -> None:
    stored = json.loads(json.dumps(move.to_dict()))
    assert Move.from_dict(stored) == move
    assert read_move(stored, "whatever the text says", {}) == move  # the stored move wins over the text


def test_true_is_not_one_and_a_list_is_a_value() -> None:
    assert value_key(True) != value_key(1) and value_key(None) != value_key("unset")
    assert value_key(1) == value_key(1.0)
    assert value_key([1, 2]) == value_key([1, 2]) and hash(value_key([1, 2]))
    on = Move(MoveKind.SWEEP, (Change("flag", True),))
    assert on.sets(MoveKind.SWEEP, "flag", True) and not on.sets(MoveKind.SWEEP, "flag", 1)
    assert not on.sets(MoveKind.RULE, "flag", True)


# Reasons as a study that stored no move keeps them (from bench/search_efficiency.py runs), with
# the change each made: read back from the text alone.
OLD = [
    ("rule: cap binds at 64 (#running-req = 64 for 95% of the level): max_running_requests 64 -> 1024",
     MoveKind.RULE, "max_running_requests", 1024, {}),
    ("rule: decode runs without CUDA graphs at 967 running (100% of the level's batches): "
     "max_running_requests 1024 -> 512", MoveKind.RULE, "max_running_requests", 512, {}),
    ("repair: rule of trial 14 ran out of memory under load (unstable-at-1024): mem_fraction_static 0.94 -> 0.9",
     MoveKind.REPAIR, "mem_fraction_static", 0.9, {"max_running_requests": 1024}),
    ("cliff: mem_fraction_static bracket 0.92-0.95", MoveKind.CLIFF, "mem_fraction_static", 0.93, {}),
    ("cliff: mem_fraction_static at 0.94, the highest that held (bracket 0.94-0.95)",
     MoveKind.CLIFF, "mem_fraction_static", 0.94, {}),
    ("sweep: moe_runner_backend=flashinfer_cutlass with patch autotune_gate",
     MoveKind.SWEEP, "moe_runner_backend", "flashinfer_cutlass", {"autotune_gate": True}),
    ("sweep: cuda_graph=False", MoveKind.SWEEP, "cuda_graph", False, {}),
    ("sweep: chunked_prefill_size=unset", MoveKind.SWEEP, "chunked_prefill_size", None, {}),
    ("model: 26 trials near the best, expects +0.3%: radix_cache=True, chunked_prefill_size=unset, "
     "schedule_conservativeness=0.3", MoveKind.MODEL, None, None, {"schedule_conservativeness": 0.3}),
    ("combine: allreduce_fusion=True (+5%), schedule_conservativeness=0.9 (+1%)", MoveKind.COMBINE, None, None,
     {"allreduce_fusion": True, "force_allreduce_fusion": True, "schedule_conservativeness": 0.9}),
]


@pytest.mark.parametrize("text, kind, name, value, others", OLD, ids=[o[0].partition(":")[0] for o in OLD])
def test_a_reason_of_before_reads_as_the_move_that_renders_it(space: Any, text: str, kind: MoveKind,
                                                              name: str | None, value: Any, others: dict) -> None:
    changes = {name: value} if name else {}
    config = dict(space.config({**space.baseline, **others, **changes}, drop_inactive=True))
    move = legacy_move(text, config)
    assert move is not None and move.kind is kind
    assert (move.parameter, value_key(move.value)) == (name, value_key(value))
    assert move.reason == text


def test_an_old_value_is_the_trials_own_else_read_from_its_text() -> None:
    text = "sweep: mem_fraction_static=0.9"
    assert legacy_move(text, {"mem_fraction_static": 0.9}).value == 0.9
    assert legacy_move("sweep: mem_fraction_static=0.123457", {"mem_fraction_static": 0.1234567}).value == 0.1234567
    assert [legacy_move(f"sweep: p={text}", {}).value for text in ("unset", "True", "512", "0.5", "fp8")] == [
        None, True, 512, 0.5, "fp8"]
    combined = legacy_move("combine: a=x (+3%), b=2 (-1%)", {"a": "x", "b": 2})
    assert [(c.parameter, c.value, round(c.gain or 0, 6)) for c in combined.changes] == [("a", "x", 1.03), ("b", 2, 0.99)]


@pytest.mark.parametrize("text", ["baseline", "sampler: tpe", "sampler: guided; the gate doubted it",
                                  "one-at-a-time: radix_cache=False from trial 0", "retry of trial 3 (its worker died)",
                                  "warm start: glm5#4", "enqueued by hand", ""])
def test_a_trial_no_move_chose_has_none(text: str) -> None:
    assert legacy_move(text, {}) is None


def _add(study: optuna.Study, space: Any, changes: dict[str, Any], **user_attrs: Any) -> None:
    config = space.config({**space.baseline, **changes}, drop_inactive=True)
    study.add_trial(create_trial(state=TrialState.COMPLETE, value=1000.0, user_attrs={
        CONFIG: dict(config), CONFIG_KEY: config.key(), **user_attrs}))


def test_the_view_reads_a_stored_move_and_an_old_trials_text_alike(space: Any) -> None:
    move = MOVES[0]
    study = optuna.create_study(direction="maximize")
    _add(study, space, {}, is_baseline=True, chosen_by="baseline")
    _add(study, space, {"max_running_requests": 1024}, chosen_by=move.reason, move=move.to_dict())
    before = move.reason.removesuffix(" (server-log)")  # reasons named no source then
    _add(study, space, {"max_running_requests": 1024}, chosen_by=before)  # written before moves were stored
    _add(study, space, {"radix_cache": False}, chosen_by="sampler: guided")
    records = read_view(study, space).records
    assert records[0].move is None and records[3].move is None
    assert records[1].move == move
    assert records[2].move is not None and records[2].move.key == move.key and records[2].move.reason == before
    assert legacy_move(move.reason, {"max_running_requests": 1024}).key == move.key  # a named source is read past


def test_a_retry_keeps_the_move_of_the_trial_it_runs_again(space: Any) -> None:
    move = MOVES[4]
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial({"x": 1}, user_attrs={CHOSEN_BY: move.reason, MOVE: move.to_dict()})
    trial = study.ask()
    trial.suggest_int("x", 0, 2)
    study.tell(trial, state=TrialState.FAIL)
    retry_later(study, study.trials[0])
    again = study.ask()
    assert again.user_attrs[RETRY_OF] == 0
    assert Move.from_dict(again.user_attrs[MOVE]) == move and again.user_attrs[CHOSEN_BY] == move.reason
