"""Which tuner process owns a server, and whether that tuner still runs.

``server.json`` records its owner: the tuner machine's host name and the tuner's PID and kernel
start time. A server whose owner still runs on this machine belongs to a live tuner (perhaps
another user's study on the same GPU host) and is no orphan; one whose owner ran on another
machine cannot be judged from here and is left alone too. Only a server whose owner is known
to be gone (or that records no owner) is an orphan.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

__all__ = ["current_owner", "owner_alive"]


def _starttime(pid: int) -> str:
    """The kernel start time of a local process ("" where /proc is not available)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return ""
    return fields[19] if len(fields) > 19 and fields[0] not in ("Z", "X") else ""


def current_owner() -> dict[str, Any]:
    """This tuner process, as recorded in the servers it starts."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "starttime": _starttime(pid)}


def owner_alive(owner: dict[str, Any] | None) -> bool:
    """True if ``owner`` may still be running: alive here, or on a machine we cannot see."""
    if not owner:
        return False
    if owner.get("host") != socket.gethostname():
        return True  # another tuner machine: never judged dead from here
    try:
        pid = int(owner.get("pid", 0))
    except (TypeError, ValueError):
        return False
    if pid <= 0:
        return False
    recorded = str(owner.get("starttime") or "")
    if recorded:
        return _starttime(pid) == recorded
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
