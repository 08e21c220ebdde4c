"""An open-loop level on the emulator: its requests arrive at their own times on the running
virtual clock, so the level records the rate asked and lasts as long as its schedule
(the emulator gathered them as a closed loop's burst, at one virtual instant, before: no rate
achieved could be read from their stamps)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.emulator.helpers import BASE_ARGV, Emulator
from tuner.loadgen import LevelSpec, run_level


@pytest.mark.parametrize("workers", [1, 2])
def test_an_open_loop_level_keeps_its_rate_on_the_virtual_clock(tmp_path: Path, workers: int) -> None:
    spec = LevelSpec(concurrency=256, num_requests=60, input_len=128, output_len=64,
                     time_limit_s=3600, request_rate=2.0, arrival="constant", warmup=4)
    with Emulator([*BASE_ARGV, "--stream-interval", "16"], tmp_path, time_scale=50) as server:
        assert server.wait_ready(120)
        metrics = asyncio.run(run_level(server.base_url, spec, client_workers=workers))
    print(f"workers {workers}: sent {metrics.achieved_request_rate} req/s, "
          f"p99 TTFT {metrics.p99_ttft_ms} ms, {metrics.duration_s:.1f} s, {metrics.client_health}")
    assert metrics.clean() and metrics.completed == 60
    assert metrics.emulated and metrics.client_health["clock"] == "emulator"
    assert metrics.request_rate == 2.0
    assert metrics.achieved_request_rate == pytest.approx(2.0, rel=0.15)
    # 60 requests at 2 a second: the level lasts about 30 host seconds, not one burst's length.
    assert metrics.duration_s == pytest.approx(30, rel=0.2)
