"""The held-out server of ``bench/client_bound_study.py``: its model saturates with concurrency,
its flags matter, and the real server serves what its model says (never more)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from tests.support.child_server import ChildServer, option_args
from tuner.loadgen import LevelSpec, run_level

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

from heldout_server import Config, model_throughput  # noqa: E402


def test_throughput_saturates_with_concurrency_and_the_cap_binds() -> None:
    config = Config(max_running_requests=512, cuda_graph_max_bs=512)
    curve = [model_throughput(config, c, 16) for c in (16, 64, 256, 512)]
    assert curve == sorted(curve)
    gains = [b / a for a, b in zip(curve, curve[1:])]
    assert gains == sorted(gains, reverse=True)  # each step up gains less: a saturating curve
    capped = Config(max_running_requests=64, cuda_graph_max_bs=512)
    assert model_throughput(capped, 512, 16) == model_throughput(capped, 64, 16)
    # a batch above the captured graphs runs eager: slower
    assert model_throughput(Config(512, 64), 512, 16) < 0.85 * curve[-1]


def _served(options: dict, concurrency: int) -> float:
    server = ChildServer(BENCH / "heldout_server.py", option_args({**options, "noise": 0}), "held-out server")
    with server:
        spec = LevelSpec(concurrency=concurrency, num_requests=8 * concurrency, input_len=16,
                         output_len=16, time_limit_s=120, warmup=concurrency, seed=0)
        return asyncio.run(run_level(server.url, spec, api="sglang")).output_throughput


def test_the_real_server_serves_its_model_never_more() -> None:
    for cap in (4, 16):
        options = {"max_running_requests": cap, "cuda_graph_max_bs": 16}
        measured = _served(options, 16)
        model = model_throughput(Config(max_running_requests=cap, cuda_graph_max_bs=16), 16, 16)
        # the scheduler never runs ahead of its model; a busy machine only slows it
        assert 0.6 * model < measured <= 1.02 * model, (cap, measured, model)
