"""The client knows when it measures itself: a level whose client lagged is measurement-bound,
and a level shared by several client processes is merged into one level's figures."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from tests.loadgen.conftest import server_record
from tuner.loadgen import LevelSpec, run_level
from tuner.loadgen._health import ClientHealth, late_share, verdict
from tuner.loadgen._stream import COMPLETED, FAILED, RequestLog


def test_a_client_whose_event_loop_is_blocked_flags_its_level(pacing_server) -> None:
    server = pacing_server(ttft_ms=50, itl_ms=10)
    spec = LevelSpec(concurrency=16, num_requests=64, input_len=16, output_len=32,
                     time_limit_s=60, warmup=4)

    async def level_beside_a_busy_task():
        async def busy() -> None:  # other work in the client's own loop, as a starved client
            while True:
                time.sleep(0.2)
                await asyncio.sleep(0.01)

        task = asyncio.ensure_future(busy())
        try:
            return await run_level(server.url, spec)
        finally:
            task.cancel()

    metrics = asyncio.run(level_beside_a_busy_task())
    assert metrics.clean()  # the server served every request ...
    assert metrics.measurement_bound is not None  # ... but the figures are the client's
    assert "event loop lagged" in metrics.measurement_bound
    assert "--client-workers" in metrics.measurement_bound
    assert not metrics.rankable()
    assert metrics.client_health["clock"] == "client"
    assert metrics.client_health["loop_lag_p99_ms"] > 100


def test_two_client_processes_make_one_level(pacing_server) -> None:
    server = pacing_server(ttft_ms=100, itl_ms=10)
    spec = LevelSpec(concurrency=16, num_requests=48, input_len=16, output_len=24,
                     time_limit_s=120, warmup=4)
    metrics = asyncio.run(run_level(server.url, spec, client_workers=2))
    truth = server_record(server.url, 24)
    assert metrics.clean() and metrics.completed == 48 == len(truth["tokens"])
    assert metrics.output_tokens == 48 * 24
    assert metrics.client_health["workers"] == 2
    # Both processes' clocks are the system's monotonic clock: merged latencies are right.
    assert metrics.median_ttft_ms == pytest.approx(np.median(truth["ttft"]), rel=0.25)
    assert metrics.median_tpot_ms == pytest.approx(np.median(truth["tpot"]), rel=0.25)


def _log(starts: list[float], ends: list[float], after: list[int]) -> RequestLog:
    log = RequestLog(len(starts))
    log.start, log.end, log.after = list(starts), list(ends), list(after)
    log.status = [COMPLETED] * len(starts)
    return log


def test_late_share_counts_the_time_a_slot_waited_for_its_client() -> None:
    # Two slots, 10 s: slot 0 sent its second request 1 s after its first ended; slot 1
    # started 0.5 s after the level.
    log = _log([0.0, 0.5, 5.0], [4.0, 10.0, 10.0], [-1, -1, 0])
    assert late_share(log, concurrency=2, started=0.0, duration=10.0) == pytest.approx(0.075)


def test_verdict_reads_the_signals_of_the_clock_that_timed_the_level() -> None:
    busy = dict(loop_lag_p99_ms=300.0, loop_lag_max_ms=900.0, cpu_busy=0.97)
    assert "event loop" in verdict(ClientHealth(clock="client", **busy))
    # On the emulator's stamps, the client's lag moves no figure: only late sends count.
    assert verdict(ClientHealth(clock="emulator", **busy)) is None
    late = ClientHealth(clock="emulator", loop_lag_p99_ms=1, loop_lag_max_ms=1, cpu_busy=0.1,
                        late_share=0.2)
    assert "late" in verdict(late)
    behind = ClientHealth(clock="emulator", loop_lag_p99_ms=1, loop_lag_max_ms=1, cpu_busy=0.1,
                          emulator_lag_s=12.0)
    assert "behind its schedule" in verdict(behind)


def test_a_measurement_bound_level_counts_as_the_lower_bound_it_is() -> None:
    from tuner.space._workload import Objective
    from tuner.study.trial import objective_value

    def level(c: int, tps: float, bound: str | None = None) -> dict:
        return {"concurrency": c, "completed": c, "failed": 0, "stop_reason": None,
                "output_throughput": tps, "measurement_bound": bound}

    levels = [level(64, 700.0), level(256, 1900.0), level(1024, 5000.0, "the client lagged")]
    values, stable = objective_value(levels, Objective())
    # the server served at least 5,000 at 1,024: the trial is not ranked on its 1,900 at 256
    assert values == [5000.0] and stable


def _stopped_by_connect_timeouts(lag_p99_ms: float, clock: str):
    from tuner.loadgen._level_figures import level_metrics
    from tuner.loadgen._share import ShareResult
    from tuner.loadgen._stream import CONNECT_TIMED_OUT
    from tuner.timescale import TimeScale

    spec = LevelSpec(concurrency=4, num_requests=4, input_len=8, output_len=8, time_limit_s=60)
    log = _log([0.0, 0.1, 0.0, 0.0], [1.0, 1.1, 0.0, 0.0], [-1] * 4)
    log.status[2:] = [FAILED, FAILED]  # two requests whose connects timed out
    for i, end in ((0, 1.0), (1, 1.1)):  # the two that completed: 8 tokens each
        log.event_times[i], log.event_counts[i], log.output_tokens[i] = [0.5, end], [1, 8], 8
    error = f"ConnectionTimeoutError: {CONNECT_TIMED_OUT}"
    result = ShareResult(log, 0.0, 1.1, f"error budget passed: 2 of 4 requests failed; last error: {error}",
                         [error], None, TimeScale())
    health = ClientHealth(clock=clock, loop_lag_p99_ms=lag_p99_ms, loop_lag_max_ms=2 * lag_p99_ms,
                          cpu_busy=0.3)
    return level_metrics(spec, TimeScale(), result, health)


def test_connects_that_timed_out_while_the_client_lagged_are_the_clients_doing() -> None:
    # On the emulator's clock the client's lag moves no stamp, but a connect that timed out while
    # its loop lagged 400 ms is still the starved client's, not the configuration's instability.
    lagging = _stopped_by_connect_timeouts(400.0, "emulator").measurement_bound
    assert lagging and lagging.startswith("connects timed out while the client's event loop lagged")
    assert "event loop lagged" in _stopped_by_connect_timeouts(400.0, "client").measurement_bound
    # A healthy client whose connects time out met a server that does not accept: the server's.
    assert _stopped_by_connect_timeouts(5.0, "emulator").measurement_bound is None
    assert _stopped_by_connect_timeouts(5.0, "client").measurement_bound is None


def test_a_level_the_client_stopped_while_measuring_itself_fails_as_measurement_bound() -> None:
    from tuner.study.trial._runner import _client_failure

    class NoLog:
        def log_excerpt(self) -> str:
            return ""

    lagging = _stopped_by_connect_timeouts(400.0, "emulator")
    assert _client_failure(lagging, NoLog()).reason == "measurement-bound"
    healthy = _stopped_by_connect_timeouts(5.0, "emulator")
    assert _client_failure(healthy, NoLog()).reason == "unstable-at-4"
