"""The guided strategy on hand-made study views: a cap that binds yields a raise-the-cap
proposal, an out-of-memory failure narrows the memory bracket, values that failed at start are
not tried again, and the rules are the engine profile's data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from optuna.trial import TrialState
from pydantic import ValidationError

from tuner.engines import load_profile
from tuner.engines._profile import EngineProfile, TuningRule
from tuner.space import load_space
from tuner.study.attrs import Outcome
from tuner.study.strategies import make_strategy
from tuner.study.strategies.guided import GuidedSettings, GuidedStrategy, cliff_bracket
from tuner.study.view import StudyView, TrialRecord

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def space() -> Any:
    return load_space(REPO / "search_spaces" / "glm5.yaml")


def record(space: Any, number: int, changes: dict[str, Any], *, value: float | None = None,
           failure: str | None = None, observations: dict[str, float] | None = None,
           chosen_by: str = "") -> TrialRecord:
    config = dict(space.config({**space.baseline, **changes}, drop_inactive=True))
    failed = failure is not None
    return TrialRecord(
        number=number,
        state=TrialState.FAIL if failed else TrialState.COMPLETE,
        config=config,
        outcome=Outcome.FAILED if failed else Outcome.COMPLETE,
        failure_reason=failure,
        levels={} if failed else {64: value * 0.5, 1024: value},
        value=None if failed else value,
        observations=observations or {},
        chosen_by=chosen_by,
        is_baseline=number == 0,
        config_key=space.config(config).key(),
    )


def view(*records: TrialRecord) -> StudyView:
    return StudyView(records, records[0])


def test_a_cap_that_binds_yields_a_raise_the_cap_proposal(space: Any) -> None:
    baseline = record(space, 0, {}, value=800.0, observations={
        "kv_tokens": 495488, "running_req_at_cap_fraction@1024": 0.93, "token_usage_max@1024": 0.07,
        "queue_growing@1024": 1.0, "running_req_at_cap_fraction": 0.2,  # unsuffixed: the last level
    })
    proposal = make_strategy("guided", space, 0).propose(view(baseline))
    assert proposal is not None
    assert proposal.reason.startswith("rule: cap binds at 64 (#running-req = 64 for 93% of the level)")
    assert proposal.config["max_running_requests"] >= 1024  # at or above the top concurrency
    unchanged = {k: v for k, v in proposal.config.items() if k != "max_running_requests"}
    assert unchanged == {k: v for k, v in baseline.config.items() if k != "max_running_requests"}


def test_a_cap_at_the_top_concurrency_is_left_alone(space: Any) -> None:
    best = record(space, 0, {"max_running_requests": 1024}, value=2000.0, observations={
        "max_running_requests": 1024, "running_req_at_cap_fraction": 0.9,
    })
    proposal = make_strategy("guided", space, 0).propose(view(best))
    assert proposal is not None and "max_running_requests" not in proposal.reason


FULL_POOL = {"token_usage_max@1024": 1.0, "running_req_max@1024": 700.0}  # memory binds


def test_an_out_of_memory_failure_narrows_the_bracket(space: Any) -> None:
    uncapped = {"max_running_requests": 1024}
    held = record(space, 0, {**uncapped, "mem_fraction_static": 0.92}, value=2000.0, observations=FULL_POOL)
    oom = record(space, 1, {**uncapped, "mem_fraction_static": 0.95}, failure="oom-at-start")
    grid = [round(0.85 + 0.01 * k, 2) for k in range(12)]
    assert cliff_bracket(view(held), "mem_fraction_static", grid) == (0.92, None, [0.93, 0.94, 0.95, 0.96])
    assert cliff_bracket(view(held, oom), "mem_fraction_static", grid) == (0.92, 0.95, [0.93, 0.94])
    proposal = make_strategy("guided", space, 0).propose(view(held, oom))
    assert proposal is not None
    assert proposal.reason == "cliff: mem_fraction_static bracket 0.92-0.95"
    assert proposal.config["mem_fraction_static"] in (0.93, 0.94)
    under_load = record(space, 2, {**uncapped, "mem_fraction_static": 0.94}, failure="unstable-at-1024")
    assert cliff_bracket(view(held, oom, under_load), "mem_fraction_static", grid)[:2] == (0.92, 0.94)
    proposal = make_strategy("guided", space, 0).propose(view(held, oom, under_load))
    assert proposal is not None and proposal.config["mem_fraction_static"] == 0.93
    assert proposal.reason == "cliff: mem_fraction_static bracket 0.92-0.94"


def test_the_memory_cliff_is_probed_only_while_the_kv_pool_is_full(space: Any) -> None:
    # Generated tuning seeds: the best's pool had room to spare on most of them, and the two or
    # three trials that bracketed the cliff (mostly out of memory at start) bought nothing.
    uncapped = {"max_running_requests": 1024}

    def first(observations: dict[str, float], settings: GuidedSettings = GuidedSettings()) -> str:
        best = record(space, 0, {**uncapped, "mem_fraction_static": 0.92}, value=2000.0, observations=observations)
        proposal = GuidedStrategy(space, 0, settings).propose(view(best))
        assert proposal is not None
        return proposal.reason

    assert first(FULL_POOL).startswith("cliff: mem_fraction_static above 0.92")
    roomy = {"token_usage_max@1024": 0.6, "running_req_max@1024": 1024.0}
    assert first(roomy).startswith("sweep: "), first(roomy)
    assert first(roomy, GuidedSettings(cliff="always")).startswith("cliff: ")  # the setting of before
    # a log that gives no token usage (vLLM's is in percent and is not read) cannot say the pool
    # has room: the cliff is probed as before
    assert first({"running_req_max@1024": 1024.0}).startswith("cliff: mem_fraction_static above 0.92")


def test_a_failure_below_a_value_that_held_is_blamed_elsewhere(space: Any) -> None:
    held = record(space, 0, {"mem_fraction_static": 0.93}, value=2000.0)
    crash = record(space, 1, {"mem_fraction_static": 0.90, "cuda_graph": False}, failure="unstable-at-1024")
    grid = [round(0.85 + 0.01 * k, 2) for k in range(12)]
    assert cliff_bracket(view(held, crash), "mem_fraction_static", grid)[:2] == (0.93, None)


def test_a_value_that_failed_at_start_is_not_tried_again(space: Any) -> None:
    top = {"max_running_requests": 1024}
    best = record(space, 0, top, value=2000.0)
    garbage = record(space, 1, {**top, "attention_backend": "fa3"}, failure="wrong-output",
                     chosen_by="sweep: attention_backend=fa3")
    strategy = GuidedStrategy(space, 0, GuidedSettings(explore_every=0))  # proposals only
    seen = [best, garbage]
    for number in range(2, 40):
        proposal = strategy.propose(view(*seen))
        if proposal is None:
            break
        assert proposal.config.get("attention_backend") != "fa3", proposal.reason
        seen.append(record(space, number, {k: v for k, v in proposal.config.items()}, value=1000.0,
                           chosen_by=proposal.reason))
    reasons = [r.chosen_by for r in seen[2:]]
    assert any(r.startswith("sweep: moe_runner_backend=flashinfer_cutlass with patch autotune_gate")
               for r in reasons), reasons  # a backend that pays only with its patch gets it
    assert len(reasons) == len(set(reasons))  # each change once


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
    assert proposal is not None
    assert proposal.reason == ("rule: decode runs without CUDA graphs at 1024 running (100% of the level's "
                               "batches): max_running_requests 1024 -> 512")
    assert proposal.config == {**best.config, "max_running_requests": 512}
    lowered = record(space, 1, {"max_running_requests": 512}, value=1900.0, chosen_by=proposal.reason)
    proposal = make_strategy("guided", space, 0).propose(view(best, lowered))
    assert proposal is not None and proposal.reason.endswith("cuda_graph_max_bs unset -> 512")


def test_a_cap_is_not_lowered_to_a_batch_the_graphs_still_do_not_cover(space: Any) -> None:
    # The graphs capture batches up to 64 (`--cuda-graph-max-bs 64`) and 1,000 run eagerly: a cap
    # of 512 runs eagerly too, only slower (the emulated seeds' study: 1024 -> 512, 33% slower).
    # What helps is capturing larger batches; with 512 captured, 512 is back under them.
    eager = {"running_req_max@1024": 1000.0, "running_req_at_cap_fraction@1024": 0.0, "eager_fraction@1024": 1.0}

    def first(captured: float, settings: GuidedSettings = GuidedSettings()) -> str:
        best = record(space, 0, {"max_running_requests": 1024, "cuda_graph_max_bs": int(captured)}, value=2000.0,
                      observations={**eager, "graph_max_bs": captured})
        proposal = GuidedStrategy(space, 0, settings).propose(view(best))
        assert proposal is not None
        return proposal.reason

    assert first(64).endswith("cuda_graph_max_bs 64 -> 128")
    assert first(512).endswith("max_running_requests 1024 -> 512")
    assert first(64, GuidedSettings(lower_within=0)).endswith("max_running_requests 1024 -> 512")  # before


def test_a_lower_to_at_most_bound_belongs_to_a_rule_that_lowers() -> None:
    with pytest.raises(ValueError, match="lower_to_at_most applies to a rule whose direction is lower"):
        TuningRule(observed="eager_fraction", at_least=0.5, change="--cuda-graph-max-bs", direction="raise",
                   says="x", lower_to_at_most="graph_max_bs")


def test_a_cap_lowered_from_every_best_is_one_value_the_model_learns(space: Any) -> None:
    # The seeds' study on the emulated host, seed 0: "decode runs without CUDA graphs" lowered the
    # cap to half the running batch from each new best, 1024 -> 483, 493, 493, 512, each 17-32%
    # slower. Four values, one column each in the additive model: it never learned the loss. On
    # the cap's doublings they are one value (512): once measured, known to lose.
    def eager(running: float) -> dict[str, float]:
        return {"running_req_max@1024": running, "running_req_at_cap_fraction@1024": 0.0, "eager_fraction@1024": 1.0}

    bests = [({}, 967.0, 2000.0), ({"radix_cache": False}, 986.0, 2600.0),
             ({"radix_cache": False, "kv_cache_dtype": "fp8_e4m3"}, 1024.0, 3100.0)]

    def lowered_caps(settings: GuidedSettings) -> list[Any]:
        seen: list[TrialRecord] = []
        caps = []
        for changes, running, value in bests:
            seen.append(record(space, len(seen), {"max_running_requests": 1024, **changes}, value=value,
                               observations=eager(running)))
            proposal = GuidedStrategy(space, 0, settings).propose(view(*seen))
            assert proposal is not None
            if proposal.config["max_running_requests"] < 1024:
                caps.append(proposal.config["max_running_requests"])
                seen.append(record(space, len(seen), dict(proposal.config), value=0.75 * value,
                                   chosen_by=proposal.reason))
        return caps

    # one loss of 25% on the same value: the model is sure, and the next bests do not run it
    assert lowered_caps(GuidedSettings()) == [512]
    assert lowered_caps(GuidedSettings(lower_to="half")) == [483, 493, 512]  # the setting of before


def test_a_value_the_server_already_used_is_not_run_again(space: Any) -> None:
    # The start-up log said the unset --cuda-graph-max-bs captured batches up to 512
    # (`Capture cuda graph bs [1, 2, ..., 512]`): `--cuda-graph-max-bs 512` is the same server.
    assert load_profile("sglang").value_in_use == {"--cuda-graph-max-bs": "graph_max_bs"}
    eager = {"running_req_max@1024": 1024.0, "running_req_at_cap_fraction@1024": 0.95, "eager_fraction@1024": 1.0}
    rule = "rule: decode runs without CUDA graphs at 1024 running (100% of the level's batches): "

    def after_the_lowered_cap(captured: float) -> list[str]:
        best = record(space, 0, {"max_running_requests": 1024}, value=2000.0,
                      observations={**eager, "graph_max_bs": captured})
        seen = [best, record(space, 1, {"max_running_requests": 512}, value=1900.0,
                             chosen_by=rule + "max_running_requests 1024 -> 512")]
        strategy = GuidedStrategy(space, 0)
        for number in range(2, 60):
            proposal = strategy.propose(view(*seen))
            if proposal is None:
                break
            seen.append(record(space, number, dict(proposal.config), value=1900.0, chosen_by=proposal.reason))
        return [r.chosen_by for r in seen[2:]]

    captured_512 = after_the_lowered_cap(512.0)
    assert not any(r.endswith("cuda_graph_max_bs unset -> 512") or r == "sweep: cuda_graph_max_bs=512"
                   for r in captured_512), captured_512
    assert "sweep: cuda_graph_max_bs=256" in captured_512  # a value it did not use is still tried
    captured_256 = after_the_lowered_cap(256.0)  # a smaller card: unset captured less, 512 is a change
    assert captured_256[0] == rule + "cuda_graph_max_bs unset -> 512"


def test_a_raised_cap_that_ran_out_of_memory_under_load_is_repaired_with_less_memory(space: Any) -> None:
    # The baseline held at 0.92 with 64 requests running; the same memory with 1,024 running ran
    # out under load. That says nothing about the cliff at 64: try the raise with less memory.
    baseline = record(space, 0, {}, value=400.0, observations={"running_req_max@1024": 64.0})
    raised = record(space, 1, {"max_running_requests": 1024}, failure="unstable-at-1024",
                    chosen_by="rule: cap binds at 64 (#running-req = 64 for 95% of the level): "
                              "max_running_requests 64 -> 1024")
    proposal = make_strategy("guided", space, 0).propose(view(baseline, raised))
    assert proposal is not None
    assert proposal.config == {**baseline.config, "max_running_requests": 1024, "mem_fraction_static": 0.90}
    assert proposal.reason.startswith("repair: rule of trial 1 ran out of memory under load (unstable-at-1024): "
                                      "mem_fraction_static 0.92 -> 0.9")
    grid = [round(0.85 + 0.01 * k, 2) for k in range(12)]
    repaired = record(space, 2, {"max_running_requests": 1024, "mem_fraction_static": 0.90}, value=1500.0,
                      observations={"running_req_max@1024": 1024.0})
    seen = view(baseline, raised, repaired)
    # what held at 64 running does not count for a batch of 1,024: 0.92 failed there
    assert cliff_bracket(seen, "mem_fraction_static", grid, batch=1024.0) == (0.90, 0.92, [0.91])
    assert cliff_bracket(seen, "mem_fraction_static", grid)[:2] == (0.92, None)


def test_one_changes_that_measured_faster_are_combined(space: Any) -> None:
    top = {"max_running_requests": 1024}
    best = record(space, 0, top, value=2000.0)
    faster = [
        record(space, 1, {**top, "radix_cache": False}, value=2080.0, chosen_by="sweep: radix_cache=False"),
        record(space, 2, {**top, "chunked_prefill_size": 4096}, value=2060.0,
               chosen_by="sweep: chunked_prefill_size=4096"),
    ]
    strategy = GuidedStrategy(space, 0)
    seen = view(best, *faster)
    assert seen.best() is faster[0]
    combined = next(strategy._combined(seen, faster[0]))
    assert combined[0]["chunked_prefill_size"] == 4096 and combined[0]["radix_cache"] is False
    assert combined[1] == "combine: chunked_prefill_size=4096 (+3%)"


def test_a_failure_of_two_new_values_is_not_held_against_the_innocent_one(space: Any) -> None:
    """Seed 4 of the seeds' study: the cutlass MoE was first drawn together with fa3 attention and
    failed on fa3's garbage; the cutlass backend must still be tried on its own (with its patch).
    Once cutlass ran clean, fa3 is the failure's one unproven value and is not tried again."""
    top = {"max_running_requests": 1024}
    best = record(space, 0, top, value=2000.0)
    both = record(space, 1, {**top, "attention_backend": "fa3", "moe_runner_backend": "flashinfer_cutlass",
                             "autotune_gate": True}, failure="wrong-output", chosen_by="sampler: tpe")
    strategy = GuidedStrategy(space, 0, GuidedSettings(explore_every=0))
    seen = [best, both]
    for number in range(2, 40):
        proposal = strategy.propose(view(*seen))
        if proposal is None:
            break
        fa3 = proposal.config.get("attention_backend") == "fa3"
        seen.append(record(space, number, dict(proposal.config), chosen_by=proposal.reason,
                           **({"failure": "wrong-output"} if fa3 else {"value": 1000.0})))
    reasons = [r.chosen_by for r in seen[2:]]
    assert any(r.startswith("sweep: moe_runner_backend=flashinfer_cutlass") for r in reasons), reasons
    assert not any(r.config.get("attention_backend") == "fa3" for r in seen[2:]), reasons


def _first_sweep(space: Any, strategy: GuidedStrategy, observations: dict[str, float] | None = None) -> list[str]:
    """The first sweep's reasons, in order, on a study where every change measures the same."""
    top = {"max_running_requests": 1024}
    seen = [record(space, 0, top, value=2000.0, observations=observations)]
    for number in range(1, 80):
        proposal = strategy.propose(view(*seen))
        if proposal is None or proposal.reason.startswith(("model: ", "combine: ")):
            break  # the first sweep is over
        seen.append(record(space, number, dict(proposal.config), value=1900.0, chosen_by=proposal.reason))
    return [r.chosen_by for r in seen[1:] if r.chosen_by.startswith("sweep: ")]


def _graphs_after_the_rest(reasons: list[str]) -> bool:
    graphs = [i for i, r in enumerate(reasons) if r.startswith(("sweep: cuda_graph=", "sweep: cuda_graph_max_bs="))]
    others = [i for i, r in enumerate(reasons) if i not in graphs]
    assert graphs and others, reasons
    return min(graphs) > max(others)


def test_cuda_graphs_are_swept_last_unless_memory_binds(space: Any) -> None:
    # The profile's sweep_late: turning CUDA graphs off or capturing fewer batches trades decode
    # speed for memory, a change a person makes for a reason, not a first guess.
    assert load_profile("sglang").sweep_late == ["--disable-cuda-graph", "--cuda-graph-max-bs"]
    reasons = _first_sweep(space, GuidedStrategy(space, 0))
    assert _graphs_after_the_rest(reasons), reasons
    assert any(r.startswith("sweep: radix_cache=") for r in reasons)  # the last in the space's order
    in_space_order = _first_sweep(space, GuidedStrategy(space, 0, GuidedSettings(sweep_late=0)))
    assert sorted(in_space_order) == sorted(reasons)  # the same changes, only the order moved
    assert not _graphs_after_the_rest(in_space_order)
    # the best's KV pool full at its top level: memory is the reason, graphs keep their place
    full = _first_sweep(space, GuidedStrategy(space, 0), {"token_usage_max@1024": 1.0})
    assert not _graphs_after_the_rest(full), full
    assert _graphs_after_the_rest(_first_sweep(space, GuidedStrategy(space, 0), {"token_usage_max@1024": 0.6}))


def test_a_rule_that_raised_the_memory_itself_is_not_repaired(space: Any) -> None:
    # Emulator seed 0: "KV pool full" raised mem_fraction_static 0.92 -> 0.94 and that ran out of
    # memory under load. The failure belongs to the cliff's bracket (0.92 held, 0.94 failed);
    # "repairing" it with less memory only re-measured the best's memory with its other changes
    # undone (two trials, nothing learned).
    top = {"max_running_requests": 1024}
    full = {"running_req_max@1024": 1024.0, "token_usage_max@1024": 1.0, "queue_growing@1024": 0.0}
    best = record(space, 0, top, value=2000.0, observations=full)
    raised = record(space, 1, {**top, "mem_fraction_static": 0.94}, failure="unstable-at-1024",
                    chosen_by="rule: KV pool full (495488 tokens, usage 100%, queue growing): "
                              "mem_fraction_static 0.92 -> 0.94")
    admitted = record(space, 2, {**top, "schedule_conservativeness": 0.6}, value=2100.0, observations=full,
                      chosen_by="rule: KV pool full and the queue grows: admit more (token usage 100%): "
                                "schedule_conservativeness unset -> 0.6")
    seen = view(best, raised, admitted)
    assert not list(GuidedStrategy(space, 0)._repairs(seen, admitted))
    proposal = GuidedStrategy(space, 0).propose(seen)
    assert proposal is not None and not proposal.reason.startswith("repair: "), proposal.reason
    # the setting that repaired it (before): less memory with the best's own change undone
    old = list(GuidedStrategy(space, 0, GuidedSettings(repair_own=0))._repairs(seen, admitted))
    assert old and old[0][0]["schedule_conservativeness"] is None and old[0][0]["mem_fraction_static"] == 0.92


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
                           chosen_by=proposal.reason, observations=observations))
    return seen[1:]


def test_a_change_the_model_knows_to_lose_is_not_run_again_from_a_new_best(space: Any) -> None:
    # The triton MoE measured 0.3x of its parent: the second sweep, from a best 2% faster (the
    # radix cache off), has nothing to learn from running it again (trace of tuning seed 0: the
    # forced allreduce fusion's slow path, 0.22x, ran four times). Every other change loses 3%.
    start = record(space, 0, {"max_running_requests": 1024}, value=2000.0).config

    def value(config: dict[str, Any]) -> float:
        others = sum(config.get(k) != start.get(k) for k in config.keys() | start.keys()
                     if k not in ("radix_cache", "moe_runner_backend"))
        moe = config.get("moe_runner_backend")
        slow = 0.3 if moe == "triton" else 0.97 if moe != start["moe_runner_backend"] else 1.0
        return 2000.0 * slow * (1.02 if config.get("radix_cache") is False else 1.0) * 0.97**others

    def triton_runs(known_loss: float) -> int:
        ran = _proposals(space, GuidedStrategy(space, 0, GuidedSettings(known_loss=known_loss)), value, 60)
        assert any(r.chosen_by == "sweep: radix_cache=False" for r in ran)
        assert sum(r.chosen_by.startswith("sweep: ") for r in ran) >= 25  # both sweeps ran
        return sum(r.config.get("moe_runner_backend") == "triton" for r in ran)

    assert triton_runs(0.05) == 1
    assert triton_runs(0.0) == 2  # without it the second sweep runs it again


def test_the_sweep_measures_the_cheapest_parameters_first(space: Any) -> None:
    # "cheap": a value that comes with a source patch first (someone wrote the patch for it), then
    # the parameters with the fewest values (radix cache: one change; chunked prefill: five).
    reasons = _first_sweep(space, GuidedStrategy(space, 0))
    names = list(dict.fromkeys(r.removeprefix("sweep: ").partition("=")[0] for r in reasons))
    assert reasons[0] == "sweep: moe_runner_backend=flashinfer_cutlass with patch autotune_gate"
    assert names.index("radix_cache") < names.index("kv_cache_dtype") < names.index("chunked_prefill_size")
    assert names.index("schedule_conservativeness") > names.index("attention_backend")
    # memory binds (the best's KV pool full): the memory trades come right after the patched values
    full = _first_sweep(space, GuidedStrategy(space, 0), {"token_usage_max@1024": 1.0})
    full_names = list(dict.fromkeys(r.removeprefix("sweep: ").partition("=")[0] for r in full))
    assert full_names[:2] == ["moe_runner_backend", "allreduce_fusion"]  # the two with patches
    assert set(full_names[2:4]) == {"cuda_graph", "cuda_graph_max_bs"}, full_names
    space_order = _first_sweep(space, GuidedStrategy(space, 0, GuidedSettings(sweep_order="space")))
    assert sorted(space_order) == sorted(reasons)  # the same changes, only the order moved


def test_a_parameter_whose_values_all_lost_waits_for_the_end_of_the_sweep(space: Any) -> None:
    # Trace of tuning seed 3: the auto MoE measured 0.35x of the best, then triton (0.57x) and
    # flashinfer_trtllm (0.50x) ran right after it while the parameters that paid waited. One
    # backend far below the best says its siblings are likely losses too: they go to the end.
    start = record(space, 0, {"max_running_requests": 1024}, value=2000.0).config

    def value(config: dict[str, Any]) -> float:
        others = sum(config.get(k) != start.get(k) for k in config.keys() | start.keys())
        return 2000.0 * (0.5 if config.get("moe_runner_backend") != start["moe_runner_backend"] else 1.0) * 0.99**others

    def first_sweep(settings: GuidedSettings) -> list[str]:
        ran = _proposals(space, GuidedStrategy(space, 0, settings), value, 60)
        ended = next((i for i, r in enumerate(ran) if r.chosen_by.startswith(("model: ", "combine: "))), len(ran))
        return [r.chosen_by for r in ran[:ended] if r.chosen_by.startswith("sweep: ")]

    def moe_and_rest(reasons: list[str]) -> tuple[list[int], list[int]]:
        moe = [i for i, reason in enumerate(reasons) if reason.startswith("sweep: moe_runner_backend=")]
        rest = [i for i, reason in enumerate(reasons) if reason.startswith(
            ("sweep: attention_backend=", "sweep: kv_cache_dtype=", "sweep: chunked_prefill_size=",
             "sweep: schedule_conservativeness=", "sweep: radix_cache=", "sweep: cuda_graph"))]
        return moe, rest

    deferred = first_sweep(GuidedSettings())
    moe, rest = moe_and_rest(deferred)
    assert len(moe) == 4, deferred  # each backend once: flashinfer_cutlass with and without its patch
    assert moe[0] < min(rest) and max(rest) < moe[1], deferred  # the patched one first, the rest last
    in_place = first_sweep(GuidedSettings(defer_loss=0.0))
    moe, rest = moe_and_rest(in_place)
    assert len(moe) == 4 and moe[1] < max(rest), in_place  # without: right after the first
