"""An open-loop level shared by several client processes (``--client-workers``) keeps the level's
one arrival schedule: each process sends its requests at their times in the whole schedule, so
the server sees the rate asked (not the rate once per process) and the merged level records it."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import numpy as np
import pytest

from tests.loadgen.conftest import pacing_server  # noqa: F401 (the fixture)
from tuner.loadgen import LevelSpec, SharedPrefix, run_level


def _arrivals(url: str, output_len: int) -> np.ndarray:
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as answer:
        records = [r for r in json.load(answer)["records"] if r["max_tokens"] == output_len]
    return np.sort(np.array([r["arrival"] for r in records]))


def test_two_client_processes_keep_one_constant_schedule(pacing_server) -> None:
    server = pacing_server(ttft_ms=5, itl_ms=1)
    source = SharedPrefix(groups=2, prefix_len=32, suffix_len=8, output_len=20)
    spec = LevelSpec(concurrency=16, num_requests=40, input_len=40, output_len=20,
                     time_limit_s=60, request_rate=20, arrival="constant", warmup=2,
                     dataset=source)
    metrics = asyncio.run(run_level(server.url, spec, client_workers=2))
    assert metrics.clean() and metrics.completed == 40
    assert metrics.client_health["workers"] == 2
    assert metrics.request_rate == 20
    assert metrics.achieved_request_rate == pytest.approx(20, rel=0.15)
    gaps = np.diff(_arrivals(server.url, 20))
    assert len(gaps) == 39
    # The server's own clock: requests arrive 1/20 s apart, with few close together.
    assert np.median(gaps) == pytest.approx(0.05, rel=0.3)
    assert np.mean(gaps < 0.0125) < 0.25
