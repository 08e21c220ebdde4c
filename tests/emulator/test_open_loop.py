"""An open-loop level on the emulator: its requests arrive at their own times on the running
virtual clock, so the level records the rate asked and lasts as long as its schedule
(the emulator gathered them as a closed loop's burst, at one virtual instant, before: no rate
achieved could be read from their stamps)."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from pathlib import Path

import pytest

from tests.support.emulator import BASE_ARGV, Emulator
from tuner.loadgen import LevelSpec, run_level
from tuner.loadgen._level_figures import level_metrics
from tuner.loadgen._share import ShareNotStarted, measure_share


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
    # 60 requests at 2 a second: the level lasts about 30 host seconds, not one burst's length
    # (about 6). Its span is the emulator's stamps: an emulator starved of CPU for 0.1 s as the
    # level starts shortens it by K x 0.1 = 5 host seconds (24.5 s seen on CI).
    assert metrics.duration_s == pytest.approx(30, rel=0.3)


def test_an_emulator_that_reads_its_requests_late_does_not_move_the_rate_sent(tmp_path: Path) -> None:
    """The emulator's process is stopped as the level starts and resumed 0.15 s later (a starved
    machine, as on CI): it reads the first requests at once and stamps them together. The rate
    the client sent is the client's own: at K = 50 those 0.15 s were 7.5 host seconds, and the
    rate read from the stamps was 2.6 req/s of 2 asked."""
    spec = LevelSpec(concurrency=256, num_requests=60, input_len=128, output_len=64,
                     time_limit_s=3600, request_rate=2.0, arrival="constant", warmup=4)
    with Emulator([*BASE_ARGV, "--stream-interval", "16"], tmp_path, time_scale=50) as server:
        assert server.wait_ready(120)
        pid = server.process.pid
        resume = threading.Timer(0.15, os.kill, (pid, signal.SIGCONT))

        async def starve_the_server() -> None:
            os.kill(pid, signal.SIGSTOP)
            resume.start()

        try:
            result = asyncio.run(measure_share(server.base_url, spec, "sglang", None, None, None,
                                               gate=starve_the_server))
        finally:
            resume.cancel()
            os.kill(pid, signal.SIGCONT)
    assert not isinstance(result, ShareNotStarted), result
    metrics = level_metrics(spec, result.scale, result, result.health)
    assert metrics.clean() and metrics.completed == 60
    stamps = sorted(result.log.start)
    # The stall happened: the emulator stamped its first requests within a few host seconds.
    assert result.scale.duration(stamps[10] - stamps[0]) < 2.0
    assert metrics.achieved_request_rate == pytest.approx(2.0, rel=0.05)
