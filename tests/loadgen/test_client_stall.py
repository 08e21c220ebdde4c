"""A client that stalls at a level's edge reads the server, not its own stall.

A busy machine can deschedule the client between the moment a level starts and its first
send, or between the last event and the moment it looks again. The server has nothing of the
level to serve then, so on this process's clock a closed loop runs from its first send to its
last event read. The stall is made real here: the client's event loop is blocked for 300 ms
(``time.sleep``) right after the level's clock started, against a real pacing server whose own
record (its first arrival to its last send) is the reference.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request

import pytest

import tuner.loadgen._share as share
from tests.loadgen.conftest import server_throughput
from tuner.loadgen import LevelSpec, run_level

OUTPUT_LEN = 48
STALL_S = 0.3
ATTEMPTS = 3


@pytest.fixture
def stalled_start(monkeypatch: pytest.MonkeyPatch) -> None:
    """Block the client's event loop for STALL_S once each level's clock has started (the
    arrival schedule is read right after it)."""
    arrivals = share.arrival_times

    def late(*args, **kwargs):
        time.sleep(STALL_S)
        return arrivals(*args, **kwargs)

    monkeypatch.setattr(share, "arrival_times", late)


@pytest.mark.parametrize("concurrency", [16, 64])
def test_a_stall_before_the_first_send_is_not_the_servers_time(
    pacing_server, stalled_start, concurrency: int
) -> None:
    server = pacing_server(ttft_ms=50, itl_ms=20)
    spec = LevelSpec(
        concurrency=concurrency,
        num_requests=4 * concurrency,
        input_len=16,
        output_len=OUTPUT_LEN,
        time_limit_s=120,
        warmup=concurrency,
    )
    # About 4 s of level: the stall alone reads 7% slow and flags the level as late, on every
    # attempt. A machine busy with other tests may stall the client once more of its own accord:
    # one of ATTEMPTS levels must read the server's own figure, unflagged.
    seen = []
    for _ in range(ATTEMPTS):
        urllib.request.urlopen(f"{server.url}/stats/reset", timeout=10).read()
        metrics = asyncio.run(run_level(server.url, spec, api="sglang"))
        truth, _ = server_throughput(server.url, OUTPUT_LEN)
        assert metrics.completed == 4 * concurrency
        seen.append((metrics.output_throughput, truth, metrics.measurement_bound))
        if (
            metrics.measurement_bound is None
            and abs(metrics.output_throughput / truth - 1) <= 0.02
        ):
            break
    else:
        pytest.fail(f"client, server's own, flag: {seen}")


def test_an_open_loop_keeps_its_start(pacing_server, stalled_start) -> None:
    """An open loop's arrivals are scheduled from its start: a late first send is the client's
    lateness and stays in its window."""
    server = pacing_server(ttft_ms=50, itl_ms=20)
    spec = LevelSpec(
        concurrency=32,
        num_requests=32,
        input_len=16,
        output_len=OUTPUT_LEN,
        time_limit_s=120,
        warmup=8,
        request_rate=64.0,
        arrival="constant",
    )
    urllib.request.urlopen(f"{server.url}/stats/reset", timeout=10).read()
    metrics = asyncio.run(run_level(server.url, spec, api="sglang"))
    _, span = server_throughput(server.url, OUTPUT_LEN)
    assert metrics.completed == 32
    # the window holds the stall: it starts when the level began, before the first send
    assert metrics.duration_s >= span + 0.8 * STALL_S, (metrics.duration_s, span)
