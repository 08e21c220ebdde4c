"""The emulated GPUs' load, shared through a small file between the server and ``nvidia-smi``.

A running emulator writes ``$TUNER_EMULATOR_STATE/emulator-<pid>.json`` a few times a second
(phase, the GPUs it uses, memory in use on each, running and queued requests, output tokens per
host second) and removes it when it stops. The stand-in ``nvidia-smi`` reads every such file
whose process is alive. Without the variable nothing is written and ``nvidia-smi`` shows idle
cards.

The host has ``$TUNER_EMULATOR_GPUS`` GPUs (default 8, the calibration's host; 16 stands for a
shared machine with room for another job). A server uses the GPUs SGLang would give it
(:func:`server_devices`: ``CUDA_VISIBLE_DEVICES``, ``--base-gpu-id``, ``--gpu-id-step`` and its
parallel sizes); ``python -m tuner.emulator.foreign_process`` holds memory on chosen GPUs as
another user's job would.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tuner.emulator.calibration import GPU

__all__ = [
    "FOREIGN_ENV",
    "GPUS_ENV",
    "STATE_ENV",
    "GpuLoad",
    "clear_load",
    "foreign_process",
    "held_by_others",
    "host_gpu_count",
    "now",
    "read_loads",
    "server_devices",
    "write_load",
]

STATE_ENV = "TUNER_EMULATOR_STATE"
FOREIGN_ENV = "TUNER_EMULATOR_FOREIGN_GPU_PROCESS"
GPUS_ENV = "TUNER_EMULATOR_GPUS"


@dataclass(frozen=True)
class GpuLoad:
    """What one emulator is doing to the emulated GPUs it uses (the same on each).

    Attributes:
        pid: the emulator's process id.
        phase: ``loading``, ``ready``, ``stopping`` or ``foreign`` (another user's job).
        memory_used_mib: memory in use on each of its GPUs.
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
    gpus: tuple[int, ...] | None = None  # the GPU indices it uses; None: every GPU

    def on(self, index: int) -> bool:
        """True if this load is on GPU ``index``."""
        return self.gpus is None or index in self.gpus


def host_gpu_count() -> int:
    """How many GPUs the emulated host has (``$TUNER_EMULATOR_GPUS``, default 8)."""
    value = os.environ.get(GPUS_ENV, "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else GPU.count


def server_devices(args: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The GPU indices a server with these SGLang server args uses, as SGLang picks them: of the
    devices ``CUDA_VISIBLE_DEVICES`` lists (every GPU when unset; CUDA stops reading the list at
    an entry that is no GPU number), ``--base-gpu-id``, then every ``--gpu-id-step``-th, as many
    as tensor x pipeline (x data, without ``--enable-dp-attention``) parallel ranks on this node.
    None when one of them is not there (CUDA's "invalid device ordinal")."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    count = host_gpu_count()
    if listed is None:
        visible = list(range(count))
    else:
        visible = []
        for entry in listed.split(","):
            entry = entry.strip()
            if not entry.isdigit() or int(entry) >= count:
                break
            visible.append(int(entry))
    replicas = 1 if args.get("enable_dp_attention") else max(1, int(args.get("dp_size") or 1))
    ranks = int(args.get("tp_size") or 1) * int(args.get("pp_size") or 1) * replicas
    ranks //= max(1, int(args.get("nnodes") or 1))
    base, step = int(args.get("base_gpu_id") or 0), int(args.get("gpu_id_step") or 1)
    ordinals = [base + rank * step for rank in range(max(1, ranks))]
    if base < 0 or step < 1 or max(ordinals) >= len(visible):
        return None
    return tuple(visible[ordinal] for ordinal in ordinals)


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
            fields = json.loads(path.read_text())
            if fields.get("gpus") is not None:
                fields["gpus"] = tuple(fields["gpus"])
            load = GpuLoad(**fields)
        except (OSError, ValueError, TypeError, AttributeError):
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


def held_by_others(pid: int, gpus: tuple[int, ...] | None = None) -> list[tuple[int, int]]:
    """``(pid, MiB)`` of every other process holding memory on the GPU of ``gpus`` (every GPU
    for None) where others hold the most now: live emulators and their lingering workers,
    foreign jobs, and the foreign process of ``$TUNER_EMULATOR_FOREIGN_GPU_PROCESS`` (GPU 0)."""
    indices = range(host_gpu_count()) if gpus is None else gpus
    loads = [load for load in read_loads() if load.pid != pid and load.memory_used_mib > 0]
    foreign = foreign_process()
    best: list[tuple[int, int]] = []
    for index in indices:
        held = [(load.pid, load.memory_used_mib) for load in loads if load.on(index)]
        if foreign is not None and index == 0:
            held.append(foreign)
        if sum(mib for _, mib in held) > sum(mib for _, mib in best):
            best = held
    return best


def now() -> float:
    """The wall clock the files are stamped with."""
    return time.time()
