"""What the stand-in ``nvidia-smi`` reports for each emulated GPU, and how each field prints.

:func:`snapshot` turns the live emulators' loads (:mod:`tuner.emulator.gpu_state`) into one
:class:`GpuReading` per GPU: 8 of the calibration's kind, power 230-280 W rising weakly with
throughput while serving, memory as the servers on it allocated it. :data:`GPU_FIELDS` maps each
``--query-gpu`` field to its CSV header unit and its value, in the format of real output
(``tests/fixtures/nvidia-smi``, copied from ``../shared/fixtures/nvidia-smi``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from tuner.emulator.calibration import GPU, KV
from tuner.emulator.gpu_state import foreign_process, host_gpu_count, read_loads

__all__ = ["APP_FIELDS", "GPU_FIELDS", "GpuReading", "snapshot"]

DRIVER_VERSION = "580.95.05"
CUDA_VERSION = "13.0"
# Not calibrated (the seeds saw only the serving figures): a card without a model, and one
# with the model loaded but no requests.
IDLE_POWER_W = 34.0
LOADED_IDLE_POWER_W = 88.0


@dataclass(frozen=True)
class GpuReading:
    """One GPU at one moment."""

    index: int
    power_w: float
    utilization: int
    memory_used_mib: int
    temperature: int
    sm_clock_mhz: int
    pstate: str
    processes: tuple[tuple[int, int], ...]  # (pid, MiB)

    @property
    def uuid(self) -> str:
        return f"GPU-7e3a{self.index:04x}-5c1d-4e2b-9f60-0c2a8d51e{self.index:03d}"

    @property
    def bus_id(self) -> str:
        return f"00000000:{0x18 + 0x10 * self.index:02X}:00.0"


def _busy_power(rng: random.Random, output_tokens_per_s: float) -> float:
    low, high = GPU.power_busy_w
    share = min(1.0, output_tokens_per_s / KV.peak_output_tokens_per_s)
    return min(high, max(low, low + (high - low) * (0.2 + 0.7 * share) + rng.uniform(-4, 4)))


def snapshot(rng: random.Random | None = None) -> list[GpuReading]:
    """Readings of all the host's GPUs now (8 unless ``$TUNER_EMULATOR_GPUS`` says)."""
    rng = rng or random.Random()
    every = read_loads()
    foreign = foreign_process()
    readings = []
    for index in range(host_gpu_count()):
        loads = [load for load in every if load.on(index)]
        memory = sum(load.memory_used_mib for load in loads)
        processes = [(load.pid, load.memory_used_mib) for load in loads]
        serving = [
            load for load in loads if load.running > 0 or load.queued > 0
        ]  # queued: prefilling
        rate = sum(load.output_tokens_per_s for load in serving)
        if serving:
            power, util = _busy_power(rng, rate), rng.randint(96, 100)
        elif loads:
            power, util = LOADED_IDLE_POWER_W + rng.uniform(-3, 3), 0
        else:
            power, util = IDLE_POWER_W + rng.uniform(-1.5, 1.5), 0
        if any(load.phase == "foreign" for load in loads):  # another user's job computing
            power, util = max(power, 142.0 + rng.uniform(-3, 3)), max(util, 37)
        if foreign is not None and index == 0:
            processes.append(foreign)
            memory += foreign[1]
            power, util = max(power, 142.0 + rng.uniform(-3, 3)), max(util, 37)
        busy = util > 0
        readings.append(
            GpuReading(
                index=index,
                power_w=round(power, 2),
                utilization=util,
                memory_used_mib=min(memory, GPU.memory_mib),
                temperature=(62 if busy else 33) + rng.randint(0, 4),
                sm_clock_mhz=2430 if busy else (1290 if loads else 180),
                pstate="P0" if loads or busy else "P8",
                processes=tuple(processes),
            )
        )
    return readings


def _timestamp() -> str:
    now = time.time()
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + f".{int(now % 1 * 1000):03d}"


# field -> (unit shown in the header, or "", value as (text, unit suffix))
Field = tuple[str, Callable[[GpuReading], tuple[str, str]]]
GPU_FIELDS: dict[str, Field] = {
    "timestamp": ("", lambda g: (_timestamp(), "")),
    "index": ("", lambda g: (str(g.index), "")),
    "count": ("", lambda g: (str(host_gpu_count()), "")),
    "name": ("", lambda g: (GPU.name, "")),
    "gpu_name": ("", lambda g: (GPU.name, "")),
    "uuid": ("", lambda g: (g.uuid, "")),
    "gpu_uuid": ("", lambda g: (g.uuid, "")),
    "pci.bus_id": ("", lambda g: (g.bus_id, "")),
    "gpu_bus_id": ("", lambda g: (g.bus_id, "")),
    "driver_version": ("", lambda g: (DRIVER_VERSION, "")),
    "compute_cap": ("", lambda g: (GPU.compute_cap, "")),
    "persistence_mode": ("", lambda g: ("Enabled", "")),
    "pstate": ("", lambda g: (g.pstate, "")),
    "power.draw": ("W", lambda g: (f"{g.power_w:.2f}", " W")),
    "power.draw.instant": ("W", lambda g: (f"{g.power_w:.2f}", " W")),
    "power.draw.average": ("W", lambda g: (f"{g.power_w:.2f}", " W")),
    "power.limit": ("W", lambda g: (f"{GPU.power_limit_w:.2f}", " W")),
    "enforced.power.limit": ("W", lambda g: (f"{GPU.power_limit_w:.2f}", " W")),
    "power.max_limit": ("W", lambda g: (f"{GPU.power_limit_w:.2f}", " W")),
    "utilization.gpu": ("%", lambda g: (str(g.utilization), " %")),
    "utilization.memory": ("%", lambda g: (str(g.utilization * 3 // 5), " %")),
    "memory.total": ("MiB", lambda g: (str(GPU.memory_mib), " MiB")),
    "memory.used": ("MiB", lambda g: (str(g.memory_used_mib), " MiB")),
    "memory.free": ("MiB", lambda g: (str(GPU.memory_mib - g.memory_used_mib), " MiB")),
    "temperature.gpu": ("", lambda g: (str(g.temperature), "")),
    "fan.speed": ("%", lambda g: (str(30 + (g.temperature - 30)), " %")),
    "clocks.current.sm": ("MHz", lambda g: (str(g.sm_clock_mhz), " MHz")),
    "clocks.sm": ("MHz", lambda g: (str(g.sm_clock_mhz), " MHz")),
    "clocks.max.sm": ("MHz", lambda g: ("2617", " MHz")),
}

# --query-compute-apps fields: (header unit, value of (reading, pid, MiB, name))
AppField = tuple[str, Callable[[GpuReading, int, int, str], tuple[str, str]]]
APP_FIELDS: dict[str, AppField] = {
    "pid": ("", lambda g, pid, mib, name: (str(pid), "")),
    "process_name": ("", lambda g, pid, mib, name: (name, "")),
    "name": ("", lambda g, pid, mib, name: (name, "")),
    "used_memory": ("MiB", lambda g, pid, mib, name: (str(mib), " MiB")),
    "used_gpu_memory": ("MiB", lambda g, pid, mib, name: (str(mib), " MiB")),
    "gpu_uuid": ("", lambda g, pid, mib, name: (g.uuid, "")),
    "gpu_bus_id": ("", lambda g, pid, mib, name: (g.bus_id, "")),
    "gpu_name": ("", lambda g, pid, mib, name: (GPU.name, "")),
    "timestamp": ("", lambda g, pid, mib, name: (_timestamp(), "")),
}
