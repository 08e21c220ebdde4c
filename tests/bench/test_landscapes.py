"""The benchmark's landscapes and the benchmark itself: generated landscapes are the same for
the same seed, their drawn effects are real (a cliff fails above it, a patch pays, a cap binds),
and the bench runs the product's loop end to end."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from landscapes import GeneratedLandscape  # noqa: E402

import search_efficiency  # noqa: E402
from tuner.space import load_space  # noqa: E402


@pytest.fixture(scope="module")
def space() -> Any:
    return load_space(REPO / "search_spaces" / "glm5.yaml")


def configs(space: Any) -> list[Any]:
    base = dict(space.baseline)
    return [
        space.config({**base, **changes}, drop_inactive=True)
        for changes in (
            {},
            {"max_running_requests": None},
            {"moe_runner_backend": "flashinfer_cutlass", "autotune_gate": True, "max_running_requests": None},
            {"attention_backend": "triton", "mem_fraction_static": 0.88},
            {"cuda_graph": False, "max_running_requests": 1024},
        )
    ]


def test_the_same_seed_gives_the_same_landscape_and_seeds_differ(space: Any) -> None:
    first, again, other = GeneratedLandscape(7, space), GeneratedLandscape(7, space), GeneratedLandscape(8, space)
    same = [first.outcome(c) for c in configs(space)]
    assert same == [again.outcome(c) for c in configs(space)]
    assert same != [other.outcome(c) for c in configs(space)]
    assert 0.02 <= first.noise <= 0.05


def test_a_drawn_cliff_fails_above_it_and_not_below(space: Any) -> None:
    for seed in range(10):
        land = GeneratedLandscape(seed, space)
        uncapped = {**space.baseline, "max_running_requests": None}
        above = space.config({**uncapped, "mem_fraction_static": round(land.start_cliff, 2)})
        assert land.outcome(above).failure == "oom-at-start"
        below = round(land.start_cliff - land.load_band - 0.01, 2)
        assert land.outcome(space.config({**uncapped, "mem_fraction_static": below})).failure is None
        if land.load_band:
            band = space.config({**uncapped, "mem_fraction_static": round(land.start_cliff - 0.01, 2)})
            assert land.outcome(band).failure == "unstable-at-1024", seed
            capped = space.config({**dict(band), "max_running_requests": 64})
            assert land.outcome(capped).failure is None  # a small batch never reaches it


def test_the_backend_pays_only_with_its_patch_and_a_cap_binds(space: Any) -> None:
    for seed in range(10):
        land = GeneratedLandscape(seed, space)
        cutlass = {**space.baseline, "moe_runner_backend": "flashinfer_cutlass", "max_running_requests": None}
        patched = land.outcome(space.config({**cutlass, "autotune_gate": True})).value
        plain = land.outcome(space.config({**cutlass, "autotune_gate": False})).value
        assert patched > 1.15 * plain
        baseline = land.outcome(space.baseline)
        assert baseline.failure is None  # the configuration run today starts
        assert baseline.observations["running_req_at_cap_fraction"] > 0.5
        raised = land.outcome(space.config({**space.baseline, "max_running_requests": 1024}))
        assert raised.value > baseline.value


def test_the_bench_runs_end_to_end_on_two_seeds(capsys: pytest.CaptureFixture[str]) -> None:
    code = search_efficiency.main([
        "--family", "generated", "--seeds", "0-1", "--strategies", "guided,random",
        "--budget", "8", "--processes", "1", "--per-seed",
    ])
    out = capsys.readouterr().out
    assert code == 0
    assert "| guided |" in out and "| random |" in out
    assert "family generated, seeds 0-1, budget 8" in out
    assert "guided: " in out


def test_a_replayed_row_stops_at_a_level_the_client_measured_itself_on() -> None:
    from landscapes import _row_outcome  # noqa: E402

    row = {"state": "COMPLETE", "tps@8": 900.0, "tps@32": 350.0, "measurement_bound@8": False,
           "measurement_bound@32": True}
    assert _row_outcome(row, [8, 32]).levels == ((8, 900.0),)  # 350 was the client, not vLLM
    row["measurement_bound@32"] = False
    assert _row_outcome(row, [8, 32]).levels == ((8, 900.0), (32, 350.0))


def test_an_unset_graph_size_and_the_size_it_captures_are_one_server(space: Any) -> None:
    # SGLang with --cuda-graph-max-bs unset captures up to 512 batches (the engine profile's
    # value_in_use): naming 512 starts the same server, so no drawn effect may tell them apart.
    # Before, an interaction drawn on "512" (or on unset) held for one of them only: seed 38's
    # +17% was out of reach of a strategy that knows they are the same server.
    checked = 0
    for seed in range(60):
        land = GeneratedLandscape(seed, space)
        for a, va, b, vb, _ in land.interactions:
            if "cuda_graph_max_bs" not in (a, b):
                continue
            other, value = (b, vb) if a == "cuda_graph_max_bs" else (a, va)
            base = {**space.baseline, "max_running_requests": None, "cuda_graph": True, other: value}
            if other == "moe_runner_backend" and value == "flashinfer_cutlass":
                base["autotune_gate"] = True
            unset, named = (space.config({**base, "cuda_graph_max_bs": bs}, drop_inactive=True) for bs in (None, 512))
            assert land.outcome(unset) == land.outcome(named), (seed, a, va, b, vb)
            checked += 1
    assert checked >= 20  # a quarter of the seeds draw such an interaction


def test_generated_landscapes_draw_the_parallel_and_speculative_dimensions(space: Any) -> None:
    # issue 29.3: DP attention, EP, the all-to-all backend and NEXTN have effects of their own
    # kind on every seed (drawn sizes)
    top = {**space.baseline, "max_running_requests": 1024}
    refused = 0
    for seed in range(20):
        land = GeneratedLandscape(seed, space)
        base = land.outcome(space.config(top, drop_inactive=True))
        dp8 = land.outcome(space.config({**top, "dp_attention": True, "dp_size": 8}, drop_inactive=True))
        dp2 = land.outcome(space.config({**top, "dp_attention": True, "dp_size": 2}, drop_inactive=True))
        # DP attention: slower at one request a rank than at a full batch, and a larger KV pool
        on = space.config({**top, "dp_attention": True, "dp_size": 8}, drop_inactive=True)
        assert land.parallel.speed(on, 1) < 1.0 and land.parallel.speed(on, 1) < land.parallel.speed(on, 1024)
        assert dp8.observations["kv_tokens"] >= dp2.observations["kv_tokens"] >= base.observations["kv_tokens"]
        # NEXTN: the gain at 64 streams against the loss at 1,024 (the cost of a round grows with the batch)
        spec = space.config({**top, "speculative_algorithm": "NEXTN"}, drop_inactive=True)
        low, high = land.parallel.speed(spec, 64), land.parallel.speed(spec, 1024)
        assert high < low and high < 1.0, seed
        deepep = land.outcome(space.config({**top, "moe_a2a_backend": "deepep"}, drop_inactive=True))
        refused += deepep.failure == "startup-crash"
        # tensor parallelism on 4 cards cannot hold the weights
        assert land.outcome(space.config({**top, "tp_size": 4}, drop_inactive=True)).failure == "oom-at-start"
    assert 10 <= refused < 20  # no NVLink between PCIe cards on most drawn hosts
