"""Fixtures of the load generator's tests: real pacing servers on 127.0.0.1, always stopped."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

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
