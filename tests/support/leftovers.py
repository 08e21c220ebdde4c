"""Servers a test left running: found by the ``server.json`` the tuner writes in each run folder
under the test's own directory, confirmed by PID, kernel start time and boot id (the product's
own check), and stopped by their process group. Nothing is matched by name or pattern."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tuner.host import LocalHost

__all__ = ["stop_servers_left_in"]


def stop_servers_left_in(root: Path, grace_s: float = 2.0) -> list[str]:
    """Stop every server started under ``root`` that still runs; say which ones."""
    host = LocalHost(str(root))
    stopped = []
    for record in sorted(root.glob("**/server.json")):
        handle = host.server_in(str(record.parent))
        if handle is None:
            continue
        _signal_group(handle.pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while host.is_running(handle) and time.monotonic() < deadline:
            time.sleep(0.1)
        if host.is_running(handle):
            _signal_group(handle.pgid, signal.SIGKILL)
        stopped.append(f"PID {handle.pid} ({record.parent.relative_to(root)})")
    return stopped


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass
