"""Stopping what a test started: a process started in its own session, and its whole group."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

__all__ = ["group_members", "stop_group"]


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def stop_group(process: subprocess.Popen, grace: float = 5.0) -> None:
    """Stop a process started with ``start_new_session=True`` and every process of its group."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace
    while group_members(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if group_members(process.pid):
        os.killpg(process.pid, signal.SIGKILL)
        while group_members(process.pid) and time.monotonic() < deadline + grace:
            time.sleep(0.1)
    process.wait(timeout=grace)
