"""The client's figures against a real server's own record of what it sent, and when.

The pacing server stamps the kernel's receive time of each request and its own send time of
each event; TTFT and TPOT computed from its record are the truth the client must match within
5% (median and mean) at 64 and at 256 concurrent streams, on warm connections; TTFT, read once a
request, within 5% plus the lateness the client reports of itself (its event loop's p99 lag).
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests.loadgen.conftest import server_record
from tuner.loadgen import LevelSpec, run_level

TTFT_MS = 300.0
ITL_MS = 40.0
OUTPUT_LEN = 64


@pytest.mark.parametrize("concurrency", [64, 256])
def test_ttft_and_tpot_agree_with_the_servers_record(pacing_server, concurrency: int) -> None:
    # Requests do not all answer in lockstep (TTFT 300-400 ms), as on a real server.
    server = pacing_server(ttft_ms=TTFT_MS, ttft_jitter_ms=100, itl_ms=ITL_MS)
    spec = LevelSpec(
        concurrency=concurrency,
        num_requests=2 * concurrency,
        input_len=64,
        output_len=OUTPUT_LEN,
        time_limit_s=120,
        warmup=concurrency,
    )
    metrics = asyncio.run(run_level(server.url, spec))
    truth = server_record(server.url, OUTPUT_LEN)

    assert metrics.stop_reason is None and metrics.clean()
    assert metrics.completed == len(truth["ttft"]) == 2 * concurrency
    assert metrics.output_tokens == int(truth["tokens"].sum()) == 2 * concurrency * OUTPUT_LEN
    assert metrics.input_tokens == 2 * concurrency * 64
    # Within 5%, plus the lateness the client reports of itself (its event loop's p99 lag: on
    # this 2-core machine another test's study may take the CPU it reads the streams with).
    lag_ms = metrics.client_health["loop_lag_p99_ms"]
    for ours, theirs in [
        (metrics.median_ttft_ms, np.median(truth["ttft"])),
        (metrics.mean_ttft_ms, np.mean(truth["ttft"])),
    ]:
        assert abs(ours - theirs) <= 0.05 * theirs + lag_ms, (ours, theirs, lag_ms)
    for ours, theirs in [
        (metrics.median_tpot_ms, np.median(truth["tpot"])),
        (metrics.mean_tpot_ms, np.mean(truth["tpot"])),
    ]:
        assert ours == pytest.approx(theirs, rel=0.05)
    # The reference is not trivial: the server really paced.
    assert np.median(truth["tpot"]) >= ITL_MS * 0.98
    assert np.median(truth["ttft"]) >= TTFT_MS


@pytest.mark.parametrize("api", ["sglang", "openai", "openai-chat"])
def test_each_api_streams_and_counts_exactly(pacing_server, api: str) -> None:
    server = pacing_server(ttft_ms=50, itl_ms=5)
    spec = LevelSpec(
        concurrency=8, num_requests=24, input_len=20, output_len=20, time_limit_s=60, warmup=2
    )
    metrics = asyncio.run(run_level(server.url, spec, api=api))
    truth = server_record(server.url, 20)
    assert metrics.clean() and metrics.completed == 24 == len(truth["tokens"])
    assert metrics.output_tokens == 24 * 20
    assert metrics.input_tokens == 24 * 20
    assert metrics.median_ttft_ms == pytest.approx(np.median(truth["ttft"]), rel=0.2)
    assert metrics.median_tpot_ms == pytest.approx(np.median(truth["tpot"]), rel=0.2)


@pytest.mark.parametrize("api", ["sglang", "openai"])
def test_several_tokens_an_event_are_counted_and_spread(pacing_server, api: str) -> None:
    # Events of 4 tokens every 4 x 20 ms, as SGLang sends with --stream-interval 4.
    server = pacing_server(ttft_ms=100, itl_ms=20, tokens_per_event=4)
    spec = LevelSpec(
        concurrency=16, num_requests=32, input_len=8, output_len=30, time_limit_s=60, warmup=16
    )
    metrics = asyncio.run(run_level(server.url, spec, api=api))
    truth = server_record(server.url, 30)
    assert metrics.clean()
    assert metrics.output_tokens == 32 * 30 == int(truth["tokens"].sum())
    # An event of 4 tokens 80 ms after the last one counts as 4 gaps of 20 ms.
    assert metrics.median_itl_ms == pytest.approx(20, rel=0.1)
    assert metrics.median_tpot_ms == pytest.approx(np.median(truth["tpot"]), rel=0.1)


def test_request_rate_spaces_the_requests(pacing_server) -> None:
    server = pacing_server(ttft_ms=5, itl_ms=1)
    spec = LevelSpec(
        concurrency=64,
        num_requests=40,
        input_len=8,
        output_len=4,
        time_limit_s=60,
        request_rate=20.0,
    )
    metrics = asyncio.run(run_level(server.url, spec))
    assert metrics.clean()
    # 40 Poisson arrivals at 20/s take about 2 s (39 gaps of 50 ms on average).
    assert 1.0 < metrics.duration_s < 4.0
    assert metrics.request_throughput == pytest.approx(20, rel=0.5)


def test_emulator_time_scale_is_applied_and_labelled(pacing_server) -> None:
    # The server runs 10x faster than the host it emulates: 300 ms TTFT is 3 s host time.
    server = pacing_server(ttft_ms=300, itl_ms=30, time_scale=10)
    spec = LevelSpec(
        concurrency=8, num_requests=16, input_len=8, output_len=6, time_limit_s=60, warmup=8
    )
    metrics = asyncio.run(run_level(server.url, spec))
    truth = server_record(server.url, 6)
    assert metrics.emulated and metrics.time_scale == 10.0
    assert metrics.median_ttft_ms == pytest.approx(np.median(truth["ttft"]) * 10, rel=0.1)
    assert metrics.median_tpot_ms == pytest.approx(np.median(truth["tpot"]) * 10, rel=0.2)
    assert metrics.median_ttft_ms > 3000 * 0.98
    assert metrics.output_throughput == pytest.approx(16 * 6 / metrics.duration_s)


def test_a_server_without_server_info_runs_at_host_time(pacing_server) -> None:
    server = pacing_server(ttft_ms=30, itl_ms=2, no_server_info=True)
    spec = LevelSpec(concurrency=4, num_requests=4, input_len=8, output_len=4, time_limit_s=60)
    metrics = asyncio.run(run_level(server.url, spec, api="openai"))
    assert metrics.clean() and not metrics.emulated and metrics.time_scale == 1.0
    assert 30 * 0.98 <= metrics.median_ttft_ms < 200  # host time, not scaled
