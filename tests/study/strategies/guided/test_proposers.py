"""The guided strategy on hand-made study views: a cap that binds yields a raise-the-cap
proposal, an out-of-memory failure narrows the memory bracket, values that failed at start are
not tried again, and the rules are the engine profile's data.

Proposals are read as typed moves (which proposer, which rule, the parameter, the value, the
signal); a few tests pin the reason text a user sees."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tests.support.guided import record, rule, sweep, view
from tuner.engines import load_profile
from tuner.engines._profile import EngineProfile, TuningRule
from tuner.space import load_space
from tuner.study.record import TrialRecord
from tuner.study.strategies import Change, Move, MoveKind, Signal, Source, make_strategy
from tuner.study.strategies.guided import (
    Candidate, CliffBracket, GuidedSettings, GuidedStrategy, ModelSettings, Reading, Round, Rule, RuleProposer,
    SweepSettings, cliff_bracket,
)
from tuner.study.strategies.guided._cliff import RepairProposer
from tuner.study.strategies.guided._combine import CombineProposer

from tests.support.guided import record, rule, space, step, sweep, variant, view  # noqa: F401 (space: a fixture)

REPO = Path(__file__).resolve().parents[4]


CAP_BINDS = "running_req_at_cap_fraction -> raise --max-running-requests"
EAGER_LOWERS_CAP = "eager_fraction -> lower --max-running-requests"
EAGER_RAISES_GRAPHS = "eager_fraction -> raise --cuda-graph-max-bs"
KV_FULL_RAISES_MEMORY = "token_usage_max -> raise --mem-fraction-static"
KV_FULL_ADMITS_MORE = "token_usage_max -> lower --schedule-conservativeness"


def test_a_cap_that_binds_yields_a_raise_the_cap_proposal(space: Any) -> None:
    baseline = record(space, 0, {}, value=800.0, observations={
        "kv_tokens": 495488, "running_req_at_cap_fraction@1024": 0.93, "token_usage_max@1024": 0.07,
        "queue_growing@1024": 1.0, "running_req_at_cap_fraction": 0.2,  # unsuffixed: the last level
    })
    proposal = make_strategy("guided", space, 0).propose(view(baseline))
    assert proposal is not None and proposal.move is not None
    assert proposal.move.rule == CAP_BINDS
    assert proposal.move.signal == Signal("running_req_at_cap_fraction", 0.93, Source.SERVER_LOG)
    assert step(proposal.move) == (MoveKind.RULE, "max_running_requests", 64, proposal.config["max_running_requests"])
    assert proposal.config["max_running_requests"] >= 1024  # at or above the top concurrency
    # what the user sees: the rule's line from the engine profile, formatted with the log's figures
    assert proposal.reason == proposal.move.reason == (
        "rule: cap binds at 64 (64 running for 93% of the level): max_running_requests 64 -> 1024 (server-log)")
    unchanged = {k: v for k, v in proposal.config.items() if k != "max_running_requests"}
    assert unchanged == {k: v for k, v in baseline.config.items() if k != "max_running_requests"}


def test_a_cap_at_the_top_concurrency_is_left_alone(space: Any) -> None:
    best = record(space, 0, {"max_running_requests": 1024}, value=2000.0, observations={
        "max_running_requests": 1024, "running_req_at_cap_fraction": 0.9,
    })
    proposal = make_strategy("guided", space, 0).propose(view(best))
    assert proposal is not None and proposal.move is not None
    assert "max_running_requests" not in {change.parameter for change in proposal.move.changes}


FULL_POOL = {"token_usage_max@1024": 1.0, "running_req_max@1024": 700.0}  # memory binds


def test_an_out_of_memory_failure_narrows_the_bracket(space: Any) -> None:
    uncapped = {"max_running_requests": 1024}
    held = record(space, 0, {**uncapped, "mem_fraction_static": 0.92}, value=2000.0, observations=FULL_POOL)
    oom = record(space, 1, {**uncapped, "mem_fraction_static": 0.95}, failure="oom-at-start")
    grid = [round(0.85 + 0.01 * k, 2) for k in range(12)]
    assert cliff_bracket(view(held), "mem_fraction_static", grid) == CliffBracket(0.92, None, [0.93, 0.94, 0.95, 0.96])
    assert cliff_bracket(view(held, oom), "mem_fraction_static", grid) == CliffBracket(0.92, 0.95, [0.93, 0.94])
    proposal = make_strategy("guided", space, 0).propose(view(held, oom))
    assert proposal is not None and proposal.move is not None
    assert step(proposal.move) == (MoveKind.CLIFF, "mem_fraction_static", 0.92, proposal.config["mem_fraction_static"])
    assert proposal.move.signal == Signal("token_usage_max", 1.0, Source.SERVER_LOG)
    assert proposal.reason == "cliff: mem_fraction_static bracket 0.92-0.95"  # what the user sees
    assert proposal.config["mem_fraction_static"] in (0.93, 0.94)
    under_load = record(space, 2, {**uncapped, "mem_fraction_static": 0.94}, failure="unstable-at-1024")
    bracket = cliff_bracket(view(held, oom, under_load), "mem_fraction_static", grid)
    assert (bracket.held, bracket.failed) == (0.92, 0.94)
    proposal = make_strategy("guided", space, 0).propose(view(held, oom, under_load))
    assert proposal is not None and proposal.move is not None
    assert step(proposal.move) == (MoveKind.CLIFF, "mem_fraction_static", 0.92, 0.93)


def test_the_memory_cliff_is_probed_only_while_the_kv_pool_is_full(space: Any) -> None:
    # Generated tuning seeds: the best's pool had room to spare on most of them, and the two or
    # three trials that bracketed the cliff (mostly out of memory at start) bought nothing.
    uncapped = {"max_running_requests": 1024}

    def first(observations: dict[str, float], strategy: GuidedStrategy | None = None) -> Move:
        best = record(space, 0, {**uncapped, "mem_fraction_static": 0.92}, value=2000.0, observations=observations)
        proposal = (strategy or GuidedStrategy(space, 0)).propose(view(best))
        assert proposal is not None and proposal.move is not None
        return proposal.move

    def above(move: Move) -> bool:
        kind, name, was, value = step(move)
        return kind is MoveKind.CLIFF and name == "mem_fraction_static" and was == 0.92 and value > 0.92

    assert above(first(FULL_POOL))
    roomy = {"token_usage_max@1024": 0.6, "running_req_max@1024": 1024.0}
    assert first(roomy).kind is MoveKind.SWEEP, first(roomy)
    # a log that gives no token usage (vLLM's is in percent and is not read) cannot say the pool
    # has room: the cliff is probed; bench's "said-full" probes only what something says is full
    silent = {"running_req_max@1024": 1024.0}
    assert above(first(silent))
    said_full = variant(space, {"cliff": "said-full"})
    assert first(silent, said_full).kind is not MoveKind.CLIFF, first(silent)
    assert first({"token_usage_max@1024": 0.95, **silent}, said_full).kind is MoveKind.CLIFF


def test_a_failure_below_a_value_that_held_is_blamed_elsewhere(space: Any) -> None:
    held = record(space, 0, {"mem_fraction_static": 0.93}, value=2000.0)
    crash = record(space, 1, {"mem_fraction_static": 0.90, "cuda_graph": False}, failure="unstable-at-1024")
    grid = [round(0.85 + 0.01 * k, 2) for k in range(12)]
    bracket = cliff_bracket(view(held, crash), "mem_fraction_static", grid)
    assert (bracket.held, bracket.failed) == (0.93, None)


def test_a_value_that_failed_at_start_is_not_tried_again(space: Any) -> None:
    top = {"max_running_requests": 1024}
    best = record(space, 0, top, value=2000.0)
    garbage = record(space, 1, {**top, "attention_backend": "fa3"}, failure="wrong-output",
                     move=sweep("attention_backend", "fa3"))
    strategy = GuidedStrategy(space, 0, GuidedSettings(explore_every=0))  # proposals only
    seen = [best, garbage]
    for number in range(2, 40):
        proposal = strategy.propose(view(*seen))
        if proposal is None:
            break
        assert proposal.config.get("attention_backend") != "fa3", proposal.reason
        seen.append(record(space, number, {k: v for k, v in proposal.config.items()}, value=1000.0,
                           move=proposal.move))
    moves = [r.move for r in seen[2:]]
    # a backend that pays only with its patch gets it
    assert sweep("moe_runner_backend", "flashinfer_cutlass", "autotune_gate").key in {m.key for m in moves}, moves
    assert len(moves) == len({m.key for m in moves})  # each change once


def test_rules_are_the_engine_profiles_data() -> None:
    rules = load_profile("sglang").tuning_rules
    cap = next(r for r in rules if r.change == "--max-running-requests")
    assert cap.direction == "raise"
    assert cap.fires({"running_req_at_cap_fraction": 0.93})
    assert not cap.fires({"running_req_at_cap_fraction": 0.1})
    kv = next(r for r in rules if r.change == "--mem-fraction-static")
    assert not kv.fires({"token_usage_max": 0.99, "queue_growing": 0.0})
    assert kv.fires({"token_usage_max": 0.99, "queue_growing": 1.0})


def test_a_value_in_use_must_name_an_observation_the_log_gives() -> None:
    shipped = load_profile("sglang").model_dump()
    with pytest.raises(ValidationError, match="value_in_use: --cuda-graph-max-bs: 'graph_bs' is not a log_observations name"):
        EngineProfile.model_validate({**shipped, "value_in_use": {"--cuda-graph-max-bs": "graph_bs"}})


def test_decode_without_cuda_graphs_lowers_the_cap_under_the_graphs(space: Any) -> None:
    # The log's decode lines said `cuda graph: False` at 1,024 running: the batch is above the
    # captured graphs. A person halves the cap (back under them) or captures larger batches.
    best = record(space, 0, {"max_running_requests": 1024}, value=2000.0, observations={
        "running_req_max@1024": 1024.0, "running_req_at_cap_fraction@1024": 0.95, "eager_fraction@1024": 1.0,
    })
    proposal = make_strategy("guided", space, 0).propose(view(best))
    assert proposal is not None and proposal.move is not None
    assert proposal.move.rule == EAGER_LOWERS_CAP
    assert proposal.move.signal == Signal("eager_fraction", 1.0, Source.SERVER_LOG)
    assert step(proposal.move) == (MoveKind.RULE, "max_running_requests", 1024, 512)
    assert proposal.reason == ("rule: decode runs without CUDA graphs at 1024 running (100% of the level's "
                               "batches): max_running_requests 1024 -> 512 (server-log)")  # what the user sees
    assert proposal.config == {**best.config, "max_running_requests": 512}
    lowered = record(space, 1, {"max_running_requests": 512}, value=1900.0, move=proposal.move)
    proposal = make_strategy("guided", space, 0).propose(view(best, lowered))
    assert proposal is not None and proposal.move is not None and proposal.move.rule == EAGER_RAISES_GRAPHS
    assert step(proposal.move) == (MoveKind.RULE, "cuda_graph_max_bs", None, 512)


def test_a_cap_is_not_lowered_to_a_batch_the_graphs_still_do_not_cover(space: Any) -> None:
    # The graphs capture batches up to 64 (`--cuda-graph-max-bs 64`) and 1,000 run eagerly: a cap
    # of 512 runs eagerly too, only slower (the emulated seeds' study: 1024 -> 512, 33% slower).
    # What helps is capturing larger batches; with 512 captured, 512 is back under them.
    eager = {"running_req_max@1024": 1000.0, "running_req_at_cap_fraction@1024": 0.0, "eager_fraction@1024": 1.0}

    def first(captured: float) -> tuple[Any, ...]:
        best = record(space, 0, {"max_running_requests": 1024, "cuda_graph_max_bs": int(captured)}, value=2000.0,
                      observations={**eager, "graph_max_bs": captured})
        proposal = GuidedStrategy(space, 0).propose(view(best))
        assert proposal is not None and proposal.move is not None
        return step(proposal.move)

    assert first(64) == (MoveKind.RULE, "cuda_graph_max_bs", 64, 128)
    assert first(512) == (MoveKind.RULE, "max_running_requests", 1024, 512)


def test_a_lower_to_at_most_bound_belongs_to_a_rule_that_lowers() -> None:
    with pytest.raises(ValueError, match="lower_to_at_most applies to a rule whose direction is lower"):
        TuningRule(observed="eager_fraction", at_least=0.5, change="--cuda-graph-max-bs", direction="raise",
                   says="x", lower_to_at_most="graph_max_bs")


def test_a_cap_lowered_from_every_best_is_one_value_the_model_learns(space: Any) -> None:
    # "Decode runs without CUDA graphs" lowers the cap from each new best (967, 986 and 1,024
    # running). Lowered to exactly half the running batch, that is three values (483, 493, 512),
    # one column each in the additive model, which never learns the loss. On the cap's doublings
    # they are one value (512): once measured, known to lose.
    def eager(running: float) -> dict[str, float]:
        return {"running_req_max@1024": running, "running_req_at_cap_fraction@1024": 0.0, "eager_fraction@1024": 1.0}

    bests = [({}, 967.0, 2000.0), ({"radix_cache": False}, 986.0, 2600.0),
             ({"radix_cache": False, "kv_cache_dtype": "fp8_e4m3"}, 1024.0, 3100.0)]

    def lowered_caps() -> list[Any]:
        seen: list[TrialRecord] = []
        caps = []
        for changes, running, value in bests:
            seen.append(record(space, len(seen), {"max_running_requests": 1024, **changes}, value=value,
                               observations=eager(running)))
            proposal = GuidedStrategy(space, 0).propose(view(*seen))
            assert proposal is not None
            if proposal.config["max_running_requests"] < 1024:
                caps.append(proposal.config["max_running_requests"])
                seen.append(record(space, len(seen), dict(proposal.config), value=0.75 * value,
                                   move=proposal.move))
        return caps

    # one loss of 25% on the same value: the model is sure, and the next bests do not run it
    assert lowered_caps() == [512]


def test_a_value_the_server_already_used_is_not_run_again(space: Any) -> None:
    # The start-up log said the unset --cuda-graph-max-bs captured batches up to 512
    # (`Capture cuda graph bs [1, 2, ..., 512]`): `--cuda-graph-max-bs 512` is the same server.
    assert load_profile("sglang").value_in_use == {"--cuda-graph-max-bs": "graph_max_bs"}
    eager = {"running_req_max@1024": 1024.0, "running_req_at_cap_fraction@1024": 0.95, "eager_fraction@1024": 1.0}

    def after_the_lowered_cap(captured: float) -> list[Move]:
        best = record(space, 0, {"max_running_requests": 1024}, value=2000.0,
                      observations={**eager, "graph_max_bs": captured})
        seen = [best, record(space, 1, {"max_running_requests": 512}, value=1900.0,
                             move=rule(EAGER_LOWERS_CAP, "max_running_requests", 1024, 512))]
        strategy = GuidedStrategy(space, 0)
        for number in range(2, 60):
            proposal = strategy.propose(view(*seen))
            if proposal is None:
                break
            seen.append(record(space, number, dict(proposal.config), value=1900.0, move=proposal.move))
        return [r.move for r in seen[2:] if r.move is not None]

    captured_512 = after_the_lowered_cap(512.0)
    assert not any(m.sets(kind, "cuda_graph_max_bs", 512) for m in captured_512
                   for kind in (MoveKind.RULE, MoveKind.SWEEP)), captured_512
    assert sweep("cuda_graph_max_bs", 256).key in {m.key for m in captured_512}  # a value it did not use is tried
    captured_256 = after_the_lowered_cap(256.0)  # a smaller card: unset captured less, 512 is a change
    assert step(captured_256[0]) == (MoveKind.RULE, "cuda_graph_max_bs", None, 512)


def test_a_raised_cap_that_ran_out_of_memory_under_load_is_repaired_with_less_memory(space: Any) -> None:
    # The baseline held at 0.92 with 64 requests running; the same memory with 1,024 running ran
    # out under load. That says nothing about the cliff at 64: try the raise with less memory.
    baseline = record(space, 0, {}, value=400.0, observations={"running_req_max@1024": 64.0})
    raised = record(space, 1, {"max_running_requests": 1024}, failure="unstable-at-1024",
                    move=rule(CAP_BINDS, "max_running_requests", 64, 1024))
    proposal = make_strategy("guided", space, 0).propose(view(baseline, raised))
    assert proposal is not None and proposal.move is not None
    assert proposal.config == {**baseline.config, "max_running_requests": 1024, "mem_fraction_static": 0.90}
    assert step(proposal.move) == (MoveKind.REPAIR, "mem_fraction_static", 0.92, 0.90)
    assert (proposal.move.trial, proposal.move.rule) == (1, CAP_BINDS)
    assert proposal.move.signal == Signal("failure_reason", "unstable-at-1024", Source.OUTCOME)
    assert proposal.reason == ("repair: rule of trial 1 ran out of memory under load (unstable-at-1024): "
                               "mem_fraction_static 0.92 -> 0.9")  # what the user sees
    grid = [round(0.85 + 0.01 * k, 2) for k in range(12)]
    repaired = record(space, 2, {"max_running_requests": 1024, "mem_fraction_static": 0.90}, value=1500.0,
                      observations={"running_req_max@1024": 1024.0})
    seen = view(baseline, raised, repaired)
    # what held at 64 running does not count for a batch of 1,024: 0.92 failed there
    assert cliff_bracket(seen, "mem_fraction_static", grid, batch=1024.0) == CliffBracket(0.90, 0.92, [0.91])
    bracket = cliff_bracket(seen, "mem_fraction_static", grid)
    assert (bracket.held, bracket.failed) == (0.92, None)


def test_one_changes_that_measured_faster_are_combined(space: Any) -> None:
    top = {"max_running_requests": 1024}
    best = record(space, 0, top, value=2000.0)
    faster = [
        record(space, 1, {**top, "radix_cache": False}, value=2080.0, move=sweep("radix_cache", False)),
        record(space, 2, {**top, "chunked_prefill_size": 4096}, value=2060.0,
               move=sweep("chunked_prefill_size", 4096)),
    ]
    strategy = GuidedStrategy(space, 0)
    seen = view(best, *faster)
    assert seen.best() is faster[0]
    combined = next(CombineProposer(strategy.plan).candidates(Round(seen, faster[0])))
    assert combined.values["chunked_prefill_size"] == 4096 and combined.values["radix_cache"] is False
    assert combined.move.kind is MoveKind.COMBINE
    assert [(c.parameter, c.value, c.gain) for c in combined.move.changes] == [
        ("chunked_prefill_size", 4096, pytest.approx(2060.0 / 2000.0))]
    assert combined.move.reason == "combine: chunked_prefill_size=4096 (+3%)"  # what the user sees


def test_a_failure_of_two_new_values_is_not_held_against_the_innocent_one(space: Any) -> None:
    """Seed 4 of the seeds' study: the cutlass MoE was first drawn together with fa3 attention and
    failed on fa3's garbage; the cutlass backend must still be tried on its own (with its patch).
    Once cutlass ran clean, fa3 is the failure's one unproven value and is not tried again."""
    top = {"max_running_requests": 1024}
    best = record(space, 0, top, value=2000.0)
    both = record(space, 1, {**top, "attention_backend": "fa3", "moe_runner_backend": "flashinfer_cutlass",
                             "autotune_gate": True}, failure="wrong-output")  # the sampler's: no move
    strategy = GuidedStrategy(space, 0, GuidedSettings(explore_every=0))
    seen = [best, both]
    for number in range(2, 40):
        proposal = strategy.propose(view(*seen))
        if proposal is None:
            break
        fa3 = proposal.config.get("attention_backend") == "fa3"
        seen.append(record(space, number, dict(proposal.config), move=proposal.move,
                           **({"failure": "wrong-output"} if fa3 else {"value": 1000.0})))
    moves = [r.move for r in seen[2:] if r.move is not None]
    assert any(m.sets(MoveKind.SWEEP, "moe_runner_backend", "flashinfer_cutlass") for m in moves), moves
    assert not any(r.config.get("attention_backend") == "fa3" for r in seen[2:]), moves


AFTER_THE_SWEEP = (MoveKind.MODEL, MoveKind.COMBINE)


def _first_sweep(space: Any, strategy: GuidedStrategy, observations: dict[str, float] | None = None) -> list[Move]:
    """The first sweep's moves, in order, on a study where every change measures the same."""
    top = {"max_running_requests": 1024}
    seen = [record(space, 0, top, value=2000.0, observations=observations)]
    for number in range(1, 80):
        proposal = strategy.propose(view(*seen))
        if proposal is None or proposal.move is None or proposal.move.kind in AFTER_THE_SWEEP:
            break  # the first sweep is over
        seen.append(record(space, number, dict(proposal.config), value=1900.0, move=proposal.move))
    return [r.move for r in seen[1:] if r.move is not None and r.move.kind is MoveKind.SWEEP]


def _parameters(moves: list[Move]) -> list[str]:
    """The parameters the moves set, in their first move's order."""
    return list(dict.fromkeys(str(m.parameter) for m in moves))


LAST = ("speculative_algorithm", "moe_a2a_backend")  # the profile's sweep_last: after the graphs too


def _graphs_after_the_rest(moves: list[Move]) -> bool:
    graphs = [i for i, m in enumerate(moves) if m.parameter in ("cuda_graph", "cuda_graph_max_bs")]
    last = [i for i, m in enumerate(moves) if m.parameter in LAST]
    others = [i for i, m in enumerate(moves) if i not in graphs and i not in last]
    assert graphs and others and last, moves
    assert min(last) > max(graphs + others), moves
    return min(graphs) > max(others)


def _same_changes(a: list[Move], b: list[Move]) -> bool:
    return Counter(m.key for m in a) == Counter(m.key for m in b)


def test_cuda_graphs_are_swept_last_unless_memory_binds(space: Any) -> None:
    # The profile's sweep_late: turning CUDA graphs off or capturing fewer batches trades decode
    # speed for memory, a change a person makes for a reason, not a first guess.
    assert load_profile("sglang").sweep_late == ["--disable-cuda-graph", "--cuda-graph-max-bs"]
    moves = _first_sweep(space, GuidedStrategy(space, 0))
    assert _graphs_after_the_rest(moves), moves
    assert "radix_cache" in _parameters(moves)  # the last in the space's order
    # the best's KV pool full at its top level: memory is the reason, graphs keep their place
    full = _first_sweep(space, GuidedStrategy(space, 0), {"token_usage_max@1024": 1.0})
    assert not _graphs_after_the_rest(full), full
    assert _graphs_after_the_rest(_first_sweep(space, GuidedStrategy(space, 0), {"token_usage_max@1024": 0.6}))


def test_a_rule_that_raised_the_memory_itself_is_not_repaired(space: Any) -> None:
    # "KV pool full" raised mem_fraction_static 0.92 -> 0.94 and that ran out of memory under
    # load. The failure belongs to the cliff's bracket (0.92 held, 0.94 failed); "repairing" it
    # with less memory would only re-measure the best's memory with its other changes undone.
    top = {"max_running_requests": 1024}
    full = {"running_req_max@1024": 1024.0, "token_usage_max@1024": 1.0, "queue_growing@1024": 0.0}
    best = record(space, 0, top, value=2000.0, observations=full)
    raised = record(space, 1, {**top, "mem_fraction_static": 0.94}, failure="unstable-at-1024",
                    move=rule(KV_FULL_RAISES_MEMORY, "mem_fraction_static", 0.92, 0.94))
    admitted = record(space, 2, {**top, "schedule_conservativeness": 0.6}, value=2100.0, observations=full,
                      move=rule(KV_FULL_ADMITS_MORE, "schedule_conservativeness", None, 0.6))
    seen = view(best, raised, admitted)

    assert not list(RepairProposer(GuidedStrategy(space, 0).plan).candidates(Round(seen, admitted)))
    proposal = GuidedStrategy(space, 0).propose(seen)
    assert proposal is not None and proposal.move is not None and proposal.move.kind is not MoveKind.REPAIR


def _proposals(space: Any, strategy: GuidedStrategy, value: Any, count: int,
               observations: dict[str, float] | None = None) -> list[TrialRecord]:
    """``count`` proposals from a best with the cap at the top concurrency, each measured by
    ``value(config)`` (no noise)."""
    top = {"max_running_requests": 1024}
    seen = [record(space, 0, top, value=2000.0, observations=observations)]
    for number in range(1, count + 1):
        proposal = strategy.propose(view(*seen))
        if proposal is None:
            break
        seen.append(record(space, number, dict(proposal.config), value=value(proposal.config),
                           move=proposal.move, observations=observations))
    return seen[1:]


def _sweep_moves(space: Any, settings: SweepSettings, value: Any) -> list[Move]:
    """The sweep's moves of a 60-trial run on ``value``, up to the first move after the sweep."""
    ran = [r.move for r in _proposals(space, GuidedStrategy(space, 0, GuidedSettings(sweep=settings)), value, 60)
           if r.move]
    ended = next((i for i, m in enumerate(ran) if m.kind in AFTER_THE_SWEEP), len(ran))
    return [m for m in ran[:ended] if m.kind is MoveKind.SWEEP]


def _changed_besides(config: dict[str, Any], start: dict[str, Any], *names: str) -> int:
    """How many parameters ``config`` sets differently from ``start``, ``names`` aside."""
    return sum(config.get(k) != start.get(k) for k in config.keys() | start.keys() if k not in names)


def test_a_change_the_model_knows_to_lose_is_not_run_again_from_a_new_best(space: Any) -> None:
    # The triton MoE measured 0.3x of its parent: the second sweep, from a best 2% faster (the
    # radix cache off), has nothing to learn from running it again (trace of tuning seed 0: the
    # forced allreduce fusion's slow path, 0.22x, ran four times). Every other change loses 3%.
    start = record(space, 0, {"max_running_requests": 1024}, value=2000.0).config

    def value(config: dict[str, Any]) -> float:
        others = _changed_besides(config, start, "radix_cache", "moe_runner_backend")
        moe = config.get("moe_runner_backend")
        slow = 0.3 if moe == "triton" else 0.97 if moe != start["moe_runner_backend"] else 1.0
        return 2000.0 * slow * (1.02 if config.get("radix_cache") is False else 1.0) * 0.97**others

    def triton_runs(known_loss: float) -> int:
        ran = _proposals(space, GuidedStrategy(space, 0, GuidedSettings(model=ModelSettings(known_loss=known_loss))), value, 60)
        assert any(r.move is not None and r.move.key == sweep("radix_cache", False).key for r in ran)
        assert sum(r.move is not None and r.move.kind is MoveKind.SWEEP for r in ran) >= 25  # both sweeps ran
        return sum(r.config.get("moe_runner_backend") == "triton" for r in ran)

    assert triton_runs(0.05) == 1
    assert triton_runs(0.0) >= 2  # without it the next sweeps run it again


def test_the_sweep_measures_the_cheapest_parameters_first(space: Any) -> None:
    # a value that comes with a source patch first (someone wrote the patch for it), then the
    # parameters with the fewest values (radix cache: one change; chunked prefill: five).
    moves = _first_sweep(space, GuidedStrategy(space, 0))
    names = _parameters(moves)
    assert moves[0].key == sweep("moe_runner_backend", "flashinfer_cutlass", "autotune_gate").key
    assert names.index("radix_cache") < names.index("kv_cache_dtype") < names.index("chunked_prefill_size")
    # the admission (the profile's capacity prior) comes early while the pool may bind: no log
    # says it has room; where the log says so, it takes its place among the others
    assert names.index("schedule_conservativeness") < names.index("attention_backend")
    roomy = _parameters(_first_sweep(space, GuidedStrategy(space, 0), {"token_usage_max@1024": 0.5}))
    assert roomy.index("schedule_conservativeness") > roomy.index("attention_backend")
    # memory binds (the best's KV pool full): the memory trades come right after the patched values
    full = _first_sweep(space, GuidedStrategy(space, 0), {"token_usage_max@1024": 1.0})
    full_names = _parameters(full)
    assert full_names[:2] == ["moe_runner_backend", "allreduce_fusion"]  # the two with patches
    # (per trial, DP attention's pool prior, 0.2 for one value where the pool is full, among them)
    assert set(full_names[2:5]) == {"cuda_graph", "cuda_graph_max_bs", "dp_attention"}, full_names
    space_order = _first_sweep(space, variant(space, {"sweep_order": "space"}))
    assert _same_changes(space_order, moves)  # the same changes, only the order moved


def test_a_parameter_whose_values_all_lost_waits_for_the_end_of_the_sweep(space: Any) -> None:
    # One backend far below the best (the auto MoE at 0.35x) says its siblings (triton,
    # flashinfer_trtllm) are likely losses too: they go to the end, after the parameters that may pay.
    start = record(space, 0, {"max_running_requests": 1024}, value=2000.0).config

    def value(config: dict[str, Any]) -> float:
        others = _changed_besides(config, start)
        return 2000.0 * (0.5 if config.get("moe_runner_backend") != start["moe_runner_backend"] else 1.0) * 0.99**others

    def moe_and_rest(moves: list[Move]) -> tuple[list[int], list[int]]:
        moe = [i for i, m in enumerate(moves) if m.parameter == "moe_runner_backend"]
        rest = [i for i, m in enumerate(moves) if m.parameter in (
            "attention_backend", "kv_cache_dtype", "chunked_prefill_size", "schedule_conservativeness",
            "radix_cache", "cuda_graph", "cuda_graph_max_bs")]
        return moe, rest

    deferred = _sweep_moves(space, SweepSettings(), value)
    moe, rest = moe_and_rest(deferred)
    assert len(moe) == 4, deferred  # each backend once: flashinfer_cutlass with and without its patch
    assert moe[0] < min(rest) and max(rest) < moe[1], deferred  # the patched one first, the rest last
    in_place = _sweep_moves(space, SweepSettings(defer_loss=0.0), value)
    moe, rest = moe_and_rest(in_place)
    assert len(moe) == 4 and moe[1] < max(rest), in_place  # without: right after the first


def test_a_rule_added_to_the_profiles_table_yields_its_typed_move() -> None:
    # docs/architecture.md's worked example: one entry of a profile's tuning_rules.
    vllm = load_space(REPO / "search_spaces" / "vllm-cpu-tiny.yaml")
    queue = TuningRule(observed="queue_growing", at_least=1, also_at_least={"running_req_at_cap_fraction": 0.5},
                       change="--max-num-batched-tokens", direction="raise",
                       says="the queue grows with the cap full ({running_req_at_cap_fraction:.0%} of the level)")
    best = record(vllm, 0, {"max_num_batched_tokens": 2048}, value=300.0,
                  observations={"queue_growing@32": 1.0, "running_req_at_cap_fraction@32": 0.8})
    proposal = GuidedStrategy(vllm, 0, rules=[queue]).propose(view(best))
    assert proposal is not None and proposal.move is not None
    assert proposal.move == Move(MoveKind.RULE, (Change("max_num_batched_tokens", 4096, 2048),),
                                 rule="queue_growing -> raise --max-num-batched-tokens",
                                 signal=Signal("queue_growing", 1.0, Source.SERVER_LOG),
                                 detail="the queue grows with the cap full (80% of the level)")
    assert proposal.reason == ("rule: the queue grows with the cap full (80% of the level): "
                               "max_num_batched_tokens 2048 -> 4096 (server-log)")
    assert GuidedStrategy(vllm, 0, rules=[]).propose(view(best)).move.kind is MoveKind.SWEEP  # without it


class TopLevelFallsOff(Rule):
    """docs/architecture.md's worked example of a rule as a class: the top level measured below
    the one under it (the client's levels), so a saturating cap is lowered to that level."""

    id = "top-level-falls-off"

    def candidates(self, rules: RuleProposer, now: Round, reading: Reading) -> Iterator[Candidate]:
        levels = now.incumbent.clean  # the client's clean levels: concurrency -> tok/s
        if len(levels) < 2:
            return
        top, below = sorted(levels)[-1], sorted(levels)[-2]
        if levels[top] >= levels[below]:
            return
        signal = Signal(f"tps@{top}", levels[top], Source.CLIENT)
        for name, param in rules.plan.space.parameters.items():
            was = now.incumbent.config.get(name)
            if param.shape == "saturating" and was is not None and was > below and not reading.tried(name, below):
                move = Move(MoveKind.RULE, (Change(name, below, was),), rule=self.id, signal=signal,
                            detail=f"{levels[top]:.0f} tok/s at {top} below {levels[below]:.0f} at {below}")
                yield Candidate({**now.incumbent.config, name: below}, move)


def test_a_rule_of_ones_own_is_one_small_class(space: Any) -> None:
    best = replace(record(space, 0, {"max_running_requests": 1024}, value=1500.0), clean={256: 2000.0, 1024: 1500.0})
    strategy = GuidedStrategy(space, 0, rules=[TopLevelFallsOff()])
    proposal = strategy.propose(view(best))
    assert proposal is not None and proposal.move is not None
    assert step(proposal.move) == (MoveKind.RULE, "max_running_requests", 1024, 256)
    assert proposal.move.rule == "top-level-falls-off"
    assert proposal.move.signal == Signal("tps@1024", 1500.0, Source.CLIENT)
    # once tried (from a best within retry_gain), it is not proposed again
    lowered = record(space, 1, {"max_running_requests": 256}, value=1400.0, move=proposal.move)
    again = strategy.propose(view(best, lowered))
    assert again is not None and again.move is not None and again.move.rule != "top-level-falls-off"


def test_a_parameter_that_won_big_waits_with_its_other_values_for_the_end_of_the_sweep(space: Any) -> None:
    # A value that won by 15% or more (the patched cutlass MoE at 1.4x) is the likely best of its
    # parameter: its other values (the auto and triton backends) wait for the end of the first
    # sweep (the second may try them), after the parameters that may still pay.
    start = record(space, 0, {"max_running_requests": 1024}, value=2000.0).config

    def value(config: dict[str, Any]) -> float:
        others = _changed_besides(config, start, "moe_runner_backend", "autotune_gate")
        moe = config.get("moe_runner_backend")
        factor = 1.4 if moe == "flashinfer_cutlass" and config.get("autotune_gate") else 1.0 if moe == start[
            "moe_runner_backend"] else 0.95
        return 2000.0 * factor * 0.99**others

    def moe_and_rest(moves: list[Move]) -> tuple[list[int], list[int]]:
        moe = [i for i, m in enumerate(moves) if m.parameter == "moe_runner_backend"]
        names = [m.parameter for m in moves]
        rest = [names.index(name) for name in (  # where each is first swept
            "attention_backend", "kv_cache_dtype", "chunked_prefill_size", "radix_cache", "ep_size")]
        return moe, rest

    deferred = _sweep_moves(space, SweepSettings(defer_won=0.15), value)
    moe, rest = moe_and_rest(deferred)
    assert deferred[0].key == sweep("moe_runner_backend", "flashinfer_cutlass", "autotune_gate").key
    assert len(moe) >= 2 and max(rest) < moe[1], deferred  # the other backends after the rest
    in_place = _sweep_moves(space, SweepSettings(defer_won=0.0), value)
    moe, rest = moe_and_rest(in_place)
    assert len(moe) >= 2 and moe[1] < max(rest), in_place  # without: in its place among the rest


def test_the_sweep_per_trial_measures_the_most_expected_gain_for_each_trial_first(space: Any) -> None:
    # A parameter's expected effect over the trials it takes (its values, at most
    # trials_at_most; one for a patched value, tried first). Where the log says the pool has room,
    # DP attention (one value, a fifth of its prior) comes after every five-value parameter by
    # expected effect alone (bench's sweep_order=effect); per trial it comes before the attention
    # backends and the chunked prefill sizes.
    roomy = {"token_usage_max@1024": 0.5}
    per_trial = GuidedSettings(sweep=SweepSettings(trials_at_most=3))  # the default
    by_effect = _parameters(_first_sweep(space, variant(space, {"sweep_order": "effect"}), roomy))
    moves = _first_sweep(space, GuidedStrategy(space, 0, per_trial), roomy)
    names = _parameters(moves)
    assert by_effect.index("dp_attention") > by_effect.index("chunked_prefill_size"), by_effect
    assert names.index("dp_attention") < names.index("attention_backend") < names.index("chunked_prefill_size"), names
    assert moves[0].key == sweep("moe_runner_backend", "flashinfer_cutlass", "autotune_gate").key  # patched first
    # with no log on the pool the admission binds (prior 0.1 over three trials): before the
    # two-value parameters, after the one-value ones
    blind = _parameters(_first_sweep(space, GuidedStrategy(space, 0, per_trial)))
    assert blind.index("radix_cache") < blind.index("schedule_conservativeness") < blind.index("attention_backend"), blind
    assert _same_changes(moves, _first_sweep(space, variant(space, {"sweep_order": "effect"}), roomy))
