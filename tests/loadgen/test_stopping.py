"""A level ends fast and says why: a killed server, errors, a stop check, a time limit."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.loadgen.conftest import open_sockets
from tuner.loadgen import LevelSpec, run_level, run_levels

LONG_LEVEL = {
    "concurrency": 64,
    "num_requests": 5000,
    "input_len": 16,
    "output_len": 400,
    "time_limit_s": 120,
}


def test_a_killed_server_ends_the_level_within_2_s_with_the_reason(pacing_server) -> None:
    server = pacing_server(ttft_ms=50, itl_ms=10)
    sockets_before = open_sockets()

    async def kill_during_level() -> tuple[float, object]:
        level = asyncio.ensure_future(run_level(server.url, LevelSpec(**LONG_LEVEL)))
        await asyncio.sleep(1.5)
        assert not level.done()
        server.kill()
        killed = time.perf_counter()
        metrics = await level
        return time.perf_counter() - killed, metrics

    elapsed, metrics = asyncio.run(kill_during_level())
    assert elapsed < 2.0
    assert metrics.stop_reason is not None
    assert "server stopped answering" in metrics.stop_reason
    assert metrics.failed > 0 and not metrics.clean()
    assert metrics.errors and len(metrics.errors) <= 5
    assert open_sockets() == sockets_before


def test_stop_check_ends_the_level_at_once_with_its_reason(pacing_server) -> None:
    server = pacing_server(ttft_ms=50, itl_ms=10)
    started = time.perf_counter()
    calls: list[float] = []
    said_stop: list[float] = []

    def worker_died() -> str | None:  # fine for its first 5 polls (about 0.5 s when idle)
        calls.append(time.perf_counter())
        if len(calls) < 5:
            return None
        said_stop.append(calls[-1])
        return "worker-died: scheduler exited"

    metrics = asyncio.run(run_level(server.url, LevelSpec(**LONG_LEVEL), stop_check=worker_died))
    assert metrics.stop_reason == "worker-died: scheduler exited"
    # Ended by the check, not run out: the level itself lasts about 5 minutes (78 waves of 4 s);
    # how soon after the check depends on the machine's load (on an idle one, well under 1 s).
    assert len(said_stop) == 1 and time.perf_counter() - said_stop[0] < 30.0
    assert len(calls) == 5 and said_stop[0] - started < 30.0  # polled again and again meanwhile


def test_a_slow_stop_check_does_not_stall_the_streams(pacing_server) -> None:
    server = pacing_server(ttft_ms=100, itl_ms=10)

    def slow_check() -> None:
        time.sleep(0.5)  # e.g. a log read over SSH; run in the loop it would stall every stream

    spec = LevelSpec(
        concurrency=16, num_requests=32, input_len=8, output_len=60, time_limit_s=60, warmup=16
    )
    metrics = asyncio.run(run_level(server.url, spec, stop_check=slow_check))
    assert metrics.clean()
    assert metrics.p99_itl_ms < 400


def test_errors_past_the_budget_end_the_level(pacing_server) -> None:
    server = pacing_server(ttft_ms=5, itl_ms=1, fail_every=1)
    started = time.perf_counter()
    spec = LevelSpec(
        concurrency=16,
        num_requests=1000,
        input_len=8,
        output_len=4,
        time_limit_s=60,
        max_error_fraction=0.02,
    )
    metrics = asyncio.run(run_level(server.url, spec))
    assert time.perf_counter() - started < 2.0
    assert metrics.stop_reason.startswith("error budget passed: 21 of 1000")
    assert "HTTP 500" in metrics.stop_reason and "injected failure" in metrics.stop_reason
    assert metrics.completed == 0 and metrics.failed >= 21
    assert metrics.errors == ('HTTP 500: {"error": {"message": "injected failure"}}',)


def test_errors_within_the_budget_are_counted_and_the_level_goes_on(pacing_server) -> None:
    server = pacing_server(ttft_ms=5, itl_ms=1, fail_every=10)
    spec = LevelSpec(
        concurrency=4,
        num_requests=100,
        input_len=8,
        output_len=4,
        time_limit_s=60,
        max_error_fraction=0.2,
    )
    metrics = asyncio.run(run_level(server.url, spec))
    assert metrics.stop_reason is None
    assert (metrics.completed, metrics.failed) == (90, 10)
    assert metrics.clean(max_failed_fraction=0.1) and not metrics.clean()


def test_the_time_limit_ends_the_level(pacing_server) -> None:
    server = pacing_server(ttft_ms=50, itl_ms=10)
    started = time.perf_counter()
    metrics = asyncio.run(run_level(server.url, LevelSpec(**{**LONG_LEVEL, "time_limit_s": 1.0})))
    assert 1.0 <= time.perf_counter() - started < 2.0
    assert metrics.stop_reason.startswith("time limit of 1 s reached")
    assert metrics.duration_s == pytest.approx(1.0, abs=0.2)


def test_a_url_that_does_not_answer_gives_a_reason_not_an_exception(pacing_server) -> None:
    server = pacing_server()
    url = server.url
    server.stop()
    started = time.perf_counter()
    metrics = asyncio.run(run_level(url, LevelSpec(**LONG_LEVEL)))
    assert time.perf_counter() - started < 2.0
    assert "does not answer" in metrics.stop_reason and metrics.completed == 0


def test_run_levels_stops_after_a_stopped_level_or_a_false_verdict(pacing_server) -> None:
    server = pacing_server(ttft_ms=5, itl_ms=1)
    specs = [
        LevelSpec(concurrency=c, num_requests=8, input_len=8, output_len=4, time_limit_s=30)
        for c in (1, 2, 4)
    ]
    seen = []
    measured = run_levels(server.url, specs, on_level=lambda m: seen.append(m) or len(seen) < 2)
    assert [m.concurrency for m in measured] == [1, 2] == [m.concurrency for m in seen]
    assert run_levels(server.url, specs) and len(run_levels(server.url, specs)) == 3
    failing = pacing_server(ttft_ms=5, itl_ms=1, fail_every=1)
    assert len(run_levels(failing.url, specs)) == 1
