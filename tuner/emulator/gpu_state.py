"""The emulated GPUs' load, shared through a small file between the server and ``nvidia-smi``.

A running emulator writes ``$TUNER_EMULATOR_STATE/emulator-<pid>.json`` a few times a second
(phase, memory in use, running and queued requests, output tokens per host second) and removes
it when it stops. The stand-in ``nvidia-smi`` reads every such file whose process is alive.
Without the variable nothing is written and ``nvidia-smi`` shows idle cards.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = [
    "FOREIGN_ENV", "STATE_ENV", "GpuLoad", "clear_load", "foreign_process", "held_by_others", "now",
    "read_loads", "write_load",
]

STATE_ENV = "TUNER_EMULATOR_STATE"
FOREIGN_ENV = "TUNER_EMULATOR_FOREIGN_GPU_PROCESS"


@dataclass(frozen=True)
class GpuLoad:
    """What one emulator is doing to the 8 emulated GPUs (the same on each).

    Attributes:
        pid: the emulator's process id.
        phase: ``loading``, ``ready`` or ``stopping``.
        memory_used_mib: memory in use on each GPU.
        running: requests in the running batch.
        queued: requests waiting.
        output_tokens_per_s: recent output rate, per host second.
        updated: when this was written (``time.time()``).
    """

    pid: int
    phase: str
    memory_used_mib: int
    running: int = 0
    queued: int = 0
    output_tokens_per_s: float = 0.0
    updated: float = 0.0


def _state_dir() -> Path | None:
    value = os.environ.get(STATE_ENV)
    return Path(value) if value else None


def _path(directory: Path, pid: int) -> Path:
    return directory / f"emulator-{pid}.json"


def write_load(load: GpuLoad) -> None:
    """Publish ``load`` (atomically); nothing happens without ``$TUNER_EMULATOR_STATE``."""
    directory = _state_dir()
    if directory is None:
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
        temporary = directory / f".emulator-{load.pid}.tmp"
        temporary.write_text(json.dumps(asdict(load)))
        os.replace(temporary, _path(directory, load.pid))
    except OSError:
        pass  # telemetry is best effort; the server keeps serving


def clear_load(pid: int) -> None:
    """Remove the file of emulator ``pid`` (when it stops)."""
    directory = _state_dir()
    if directory is not None:
        _path(directory, pid).unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return False
    return fields[0] not in ("Z", "X")


def read_loads() -> list[GpuLoad]:
    """The loads of the emulators that are alive now (files of dead ones are ignored)."""
    directory = _state_dir()
    if directory is None or not directory.is_dir():
        return []
    loads = []
    for path in sorted(directory.glob("emulator-*.json")):
        try:
            load = GpuLoad(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            continue
        if _alive(load.pid):
            loads.append(load)
    return loads


def foreign_process() -> tuple[int, int] | None:
    """``(pid, MiB)`` of the foreign process on GPU 0 that ``$TUNER_EMULATOR_FOREIGN_GPU_PROCESS``
    asks for: its value is the PID to show (``1`` or ``true``: PID 2147), or unset for none."""
    value = os.environ.get(FOREIGN_ENV, "").strip().lower()
    if value in ("", "0", "false", "no"):
        return None
    pid = int(value) if value.isdigit() and int(value) > 1 else 2147
    return pid, 23_456


def held_by_others(pid: int) -> list[tuple[int, int]]:
    """``(pid, MiB)`` of every other process holding memory on the emulated GPUs now (live
    emulators and their lingering workers, and the foreign process if asked for)."""
    held = [(load.pid, load.memory_used_mib) for load in read_loads()
            if load.pid != pid and load.memory_used_mib > 0]
    foreign = foreign_process()
    return held + ([foreign] if foreign is not None else [])


def now() -> float:
    """The wall clock the files are stamped with."""
    return time.time()
