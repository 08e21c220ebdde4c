"""Fixtures of the load generator's tests: real pacing servers on 127.0.0.1, always stopped,
and helpers to read a server's own record and this process's open sockets."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from tests.support.pacing_server import PacingServer


@pytest.fixture
def pacing_server() -> Iterator[Callable[..., PacingServer]]:
    """A factory: ``pacing_server(ttft_ms=300, itl_ms=20)`` starts a server; all stop at the end."""
    started: list[PacingServer] = []

    def start(**options: object) -> PacingServer:
        server = PacingServer(**options)
        started.append(server)
        return server.start()

    try:
        yield start
    finally:
        for server in started:
            server.stop()


def open_sockets() -> int:
    """How many sockets this process holds open."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return count


def server_record(url: str, output_len: int) -> dict[str, np.ndarray]:
    """The pacing server's own record of its streamed requests of ``output_len`` tokens:
    TTFT and TPOT (ms) and tokens, one entry a request."""
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as answer:
        records = [r for r in json.load(answer)["records"] if r["max_tokens"] == output_len]
    return {
        "ttft": np.array([r["first_send"] - r["arrival"] for r in records]) * 1e3,
        "tpot": np.array([(r["last_send"] - r["first_send"]) / (r["tokens"] - 1) for r in records])
        * 1e3,
        "tokens": np.array([r["tokens"] for r in records]),
    }


def server_throughput(url: str, output_len: int) -> tuple[float, float]:
    """The pacing server's own output tok/s over its streamed requests of ``output_len`` tokens
    (its first arrival to its last send), and that span in seconds."""
    with urllib.request.urlopen(f"{url}/stats", timeout=10) as answer:
        records = [r for r in json.load(answer)["records"] if r["max_tokens"] == output_len]
    span = max(r["last_send"] for r in records) - min(r["arrival"] for r in records)
    return sum(r["tokens"] for r in records) / span, span
