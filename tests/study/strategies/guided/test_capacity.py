"""The guided strategy without an engine log: the client's levels say the cap binds, the sweep
goes by expected effect (capacity first), a capacity change that lost alone is tried again
with the changes that lifted the best. Hand-made views of glm5.yaml's space."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tuner.engines import CapacityFlag
from tuner.study.record import Level
from tuner.space import load_space
from tuner.study.strategies import Change, Move, MoveKind, Source
from tuner.study.strategies import make_strategy
from tuner.study.strategies.guided import Candidate, GuidedSettings, GuidedStrategy
from tests.support.guided import record, step, variant, view

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def space() -> Any:
    return load_space(REPO / "search_spaces" / "glm5.yaml")


def levels(*points: tuple[int, float, float, float]) -> tuple[Level, ...]:
    """Levels of (concurrency, tok/s, median TTFT ms, median TPOT ms), every request served."""
    return tuple(Level(concurrency=c, num_requests=max(128, c), completed=max(128, c), failed=0,
                              duration_s=60.0, input_tokens=0, output_tokens=0, output_throughput=tps,
                              total_throughput=2 * tps, request_throughput=1.0, median_ttft_ms=ttft,
                              median_tpot_ms=tpot) for c, tps, ttft, tpot in points)


# issue 28's held-out baseline, no log lines: a cap of 64, throughput flat from 64 to 1024
FLAT = levels((64, 2083.0, 300.0, 30.0), (256, 2150.0, 4100.0, 30.5), (1024, 2185.0, 16500.0, 29.8))


def test_a_flat_client_level_raises_the_cap_with_the_client_named(space: Any) -> None:
    base = replace(record(space, 0, {}, value=2185.0), levels=FLAT)
    proposal = GuidedStrategy(space, 0).propose(view(base))
    assert proposal is not None and proposal.move is not None
    move = proposal.move
    assert (move.kind, move.rule, move.parameter, move.value) == (MoveKind.RULE, "client-cap-binds",
                                                                  "max_running_requests", 1024)
    assert move.signal is not None and move.signal.source is Source.CLIENT
    assert move.reason.startswith("rule: cap binds at 64: throughput flat from 64 to 1024 (client)")


def test_a_capacity_change_that_lost_alone_is_tried_again_from_a_lifted_best(space: Any) -> None:
    # The cap raised from the baseline lost (its KV pool or backend could not use the batch);
    # the cutlass MoE with its patch then lifted the best, whose levels still run flat at 64.
    cap_move = Move(MoveKind.SWEEP, (Change("max_running_requests", 512, 64),))
    moe = {"moe_runner_backend": "flashinfer_cutlass", "autotune_gate": True}
    moe_move = Move(MoveKind.SWEEP, (Change("moe_runner_backend", "flashinfer_cutlass", "flashinfer_trtllm"),),
                    patches=("autotune_gate",))
    seen = view(record(space, 0, {}, value=2000.0),
                record(space, 1, {"max_running_requests": 512}, value=1800.0, move=cap_move),
                replace(record(space, 2, moe, value=2600.0, move=moe_move), levels=FLAT))
    candidates = list(GuidedStrategy(space, 0).proposers[2].candidates(_round(space, seen)))
    assert candidates, "the retry proposer proposed nothing"
    move = candidates[0].move
    assert (move.rule, move.parameter, move.value, move.trial) == ("capacity-retry", "max_running_requests", 512, 1)
    assert candidates[0].values["moe_runner_backend"] == "flashinfer_cutlass"
    # without a binding limit in the best's levels, nothing is retried
    quiet = view(*seen.records[:2], replace(seen.records[2], levels=()))
    assert not list(GuidedStrategy(space, 0).proposers[2].candidates(_round(space, quiet)))


def test_the_sweep_tries_a_cap_below_the_top_before_the_few_percent_flags(space: Any) -> None:
    # no log line read: the profile's capacity prior puts the cap (64, below the top 1,024) first
    from tuner.study.strategies.guided._sweep import SweepProposer

    strategy = GuidedStrategy(space, 0)
    sweep = next(p for p in strategy.proposers if isinstance(p, SweepProposer))
    names = [c.move.parameter for c in sweep.candidates(_round(space, view(record(space, 0, {}, value=2000.0))))]
    # per trial (the default): right after the patched MoE value (0.3 for one trial against 0.5
    # for the cap's three values), before every parameter of a few percent
    assert names.index("moe_runner_backend") < names.index("max_running_requests") < names.index("radix_cache")
    by_effect = variant(space, {"sweep_order": "effect"})
    sweep = next(p for p in by_effect.proposers if isinstance(p, SweepProposer))
    names = [c.move.parameter for c in sweep.candidates(_round(space, view(record(space, 0, {}, value=2000.0))))]
    assert names.index("max_running_requests") < names.index("moe_runner_backend") < names.index("radix_cache")


def test_a_capacity_prior_is_a_gain_between_0_and_1() -> None:
    assert CapacityFlag(kind="cap", effect=0.5).effect == 0.5
    with pytest.raises(ValidationError):
        CapacityFlag(kind="cap", effect=2.0)
    with pytest.raises(ValidationError):
        CapacityFlag(kind="throttle", effect=0.1)


def _round(space: Any, seen: Any) -> Any:
    from tuner.study.strategies.guided import Round

    return Round(seen, seen.best() or seen.baseline)


def test_dp_attention_comes_early_only_where_the_log_says_the_pool_is_full(space: Any) -> None:
    # the profile's capacity kind "pool": a layout that holds more requests in the same memory
    from tuner.study.strategies.guided._capacity import expected_effect

    plan = GuidedStrategy(space, 0).plan
    top = {"max_running_requests": 1024}

    def effect(observations: dict[str, float]) -> float:
        return expected_effect(plan, record(space, 0, top, value=2000.0, observations=observations), "dp_attention", False)

    full, roomy, silent = effect({"token_usage_max@1024": 1.0}), effect({"token_usage_max@1024": 0.5}), effect({})
    assert full == 0.2 and roomy == pytest.approx(0.04)
    assert silent == plan.settings.sweep.default_effect  # a log that says nothing of the pool: no prior
    # the admission (schedule conservativeness) binds unless the log says the pool has room
    admission = [expected_effect(plan, record(space, 0, top, value=2000.0, observations=o),
                                 "schedule_conservativeness", False) for o in ({}, {"token_usage_max@1024": 0.5})]
    assert admission == [0.1, pytest.approx(0.02)]


BINDS = {"kv_tokens": 495488, "running_req_at_cap_fraction@1024": 0.93, "token_usage_max@1024": 0.07,
         "queue_growing@1024": 1.0}


@pytest.mark.parametrize(("graphs", "log_says", "carried"), [
    (64, None, 512),     # set below the batch: raised with the cap, to the highest captured batch offered
    (256, 256, 512),
    (512, 512, None),    # no higher value offered: nothing carried
    (None, 64, None),    # unset: SGLang captures with the cap (64 at a cap of 64), nothing carried
])
def test_a_raised_cap_raises_the_captured_batch_with_it(space: Any, graphs: Any, log_says: Any, carried: Any) -> None:
    """SGLang decodes a batch above ``--cuda-graph-max-bs`` without CUDA graphs: the cap raised to
    the top concurrency (1,024) carries the captured batch up with it (the profile's
    ``cap_covered_by``), so the move measures a larger batch, not a larger batch run eagerly."""
    observations = dict(BINDS, **({"graph_max_bs": log_says} if log_says else {}))
    baseline = record(space, 0, {"cuda_graph_max_bs": graphs}, value=800.0, observations=observations)
    proposal = make_strategy("guided", space, 0).propose(view(baseline))
    assert proposal is not None and proposal.move is not None
    assert step(proposal.move) == (MoveKind.RULE, "max_running_requests", 64, 1024)  # still the rule's one change
    assert proposal.config.get("cuda_graph_max_bs") == (carried if carried else graphs)
    if carried:
        assert proposal.move.carried == (Change("cuda_graph_max_bs", carried, graphs),)
        assert proposal.reason.endswith(f"; with cuda_graph_max_bs {graphs or 'unset'} -> {carried} (covers the batch)")
    else:
        assert proposal.move.carried == ()


def test_a_lowered_cap_carries_nothing(space: Any) -> None:
    record_ = record(space, 0, {"cuda_graph_max_bs": 64, "max_running_requests": 512}, value=800.0)
    strategy = make_strategy("guided", space, 0)
    candidate = Candidate({**record_.config, "max_running_requests": 256},
                          Move(MoveKind.SWEEP, (Change("max_running_requests", 256),)))
    assert strategy._carry(candidate, record_) is candidate
    raised = Candidate({**record_.config, "max_running_requests": 1024},
                       Move(MoveKind.SWEEP, (Change("max_running_requests", 1024),)))
    assert strategy._carry(raised, record_).values["cuda_graph_max_bs"] == 512
    own = Candidate({**record_.config, "max_running_requests": 1024, "cuda_graph_max_bs": 128},
                    Move(MoveKind.SWEEP, (Change("max_running_requests", 1024),)))
    assert strategy._carry(own, record_) is own  # the candidate's own value of it stands
