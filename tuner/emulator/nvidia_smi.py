"""The stand-in ``nvidia-smi`` of the emulated host (``tuner/emulator/bin/nvidia-smi`` runs it).

Supported, in the real tool's output format:

- ``--query-gpu=<fields> --format=csv[,noheader][,nounits]`` (``-i N`` picks GPUs);
- ``-l S`` / ``-lms MS`` (also ``--loop=``/``--loop-ms=``): sample again and again in one
  process until killed, the header printed once;
- ``--query-compute-apps=pid,process_name,used_memory --format=csv``: the serving emulator on
  each GPU, and the foreign process that ``$TUNER_EMULATOR_FOREIGN_GPU_PROCESS`` asks for;
- ``-L``, ``topo -m`` and the plain table.

Anything else prints nvidia-smi's "Invalid combination of input arguments" and exits 2.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tuner.emulator.calibration import GPU
from tuner.emulator.gpu_state import host_gpu_count
from tuner.emulator.smi_fields import (
    APP_FIELDS,
    CUDA_VERSION,
    DRIVER_VERSION,
    GPU_FIELDS,
    GpuReading,
    snapshot,
)

__all__ = ["main"]

INVALID = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."


def _options(argv: Sequence[str]) -> dict[str, str] | None:
    """``{"query-gpu": ..., "format": ..., "loop-ms": ..., "id": ..., ...}`` or None."""
    aliases = {"-l": "loop", "-lms": "loop-ms", "-i": "id", "-L": "list-gpus", "-q": "query"}
    options: dict[str, str] = {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, _, value = arg.partition("=")
        key = aliases.get(name) or (name[2:] if name.startswith("--") else None)
        if key is None:
            return None
        if key in ("list-gpus", "query"):
            options[key] = ""
            continue
        if not value:
            if not args:
                return None
            value = args.pop(0)
        options[key] = value
    return options


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode() or "python3"
    except OSError:
        return "/usr/bin/python3"


def _csv(fields: list[str], table: dict, rows: list[tuple], header: bool, units: bool) -> str:
    lines = []
    if header:
        lines.append(", ".join(f"{f} [{table[f][0]}]" if table[f][0] else f for f in fields))
    for row in rows:
        cells = [table[f][1](*row) for f in fields]
        lines.append(", ".join(text + (unit if units else "") for text, unit in cells))
    return "\n".join(lines)


def _selected(readings: list[GpuReading], ids: str | None) -> list[GpuReading]:
    if ids is None:
        return readings
    wanted = {int(part) for part in ids.split(",")}
    return [reading for reading in readings if reading.index in wanted]


def _query(options: dict[str, str], first: bool) -> str | None:
    fmt = options.get("format", "")
    if not fmt.startswith("csv"):
        return None
    header, units = "noheader" not in fmt and first, "nounits" not in fmt
    readings = _selected(snapshot(), options.get("id"))
    if "query-gpu" in options:
        fields = [f.strip() for f in options["query-gpu"].split(",") if f.strip()]
        table: dict = GPU_FIELDS
        rows: list[tuple] = [(reading,) for reading in readings]
    else:
        fields = [f.strip() for f in options["query-compute-apps"].split(",") if f.strip()]
        table = APP_FIELDS
        rows = [(g, pid, mib, _name(pid)) for g in readings for pid, mib in g.processes]
    for field in fields:
        if field not in table:
            raise KeyError(field)
    return _csv(fields, table, rows, header, units)


def _plain() -> str:
    readings = snapshot()
    bar = "+-----------------------------------------+------------------------+----------------------+"
    lines = [
        time.strftime("%a %b %d %H:%M:%S %Y"),
        "+" + "-" * 89 + "+",
        (
            f"| NVIDIA-SMI {DRIVER_VERSION}             Driver Version: {DRIVER_VERSION}     "
            f"CUDA Version: {CUDA_VERSION}     |"
        ),
        bar,
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|=========================================+========================+======================|",
    ]
    for g in readings:
        name = GPU.name if len(GPU.name) <= 29 else GPU.name[:26] + "..."
        lines.append(f"| {g.index:3d}  {name:<31}On  |   {g.bus_id} Off |{'Off':>21} |")
        usage = f"{g.memory_used_mib}MiB / {GPU.memory_mib}MiB"
        fan = g.temperature
        lines.append(
            f"|{fan:>3}%  {g.temperature:>3}C    {g.pstate}{g.power_w:>15.0f}W / "
            f"{GPU.power_limit_w:>4.0f}W | {usage:>22} |{g.utilization:>7}%      Default |"
        )
        lines.append(bar)
    lines += [
        "",
        "+" + "-" * 89 + "+",
        "| Processes:" + " " * 78 + "|",
        "|  GPU   GI   CI              PID   Type   Process name" + " " * 24 + "GPU Memory |",
        "|" + "=" * 89 + "|",
    ]
    processes = [(g.index, pid, mib) for g in readings for pid, mib in g.processes]
    for index, pid, mib in processes:
        name = _name(pid)[-37:]
        lines.append(f"|  {index:3d}   N/A  N/A  {pid:>15}      C   {name:<37} {mib:>7}MiB |")
    if not processes:
        lines.append("|  No running processes found" + " " * 61 + "|")
    lines.append("+" + "-" * 89 + "+")
    return "\n".join(lines)


def _topology() -> str:
    count = host_gpu_count()
    header = "\t" + "\t".join(f"GPU{i}" for i in range(count)) + "\tCPU Affinity\tNUMA Affinity"
    rows = [header]
    for i in range(count):
        links = ["X" if i == j else ("NODE" if i // 4 == j // 4 else "SYS") for j in range(count)]
        cpus = "0-31,64-95" if i < 4 else "32-63,96-127"
        rows.append(f"GPU{i}\t" + "\t".join(f" {link} " for link in links) + f"\t{cpus}\t{i // 4}")
    return (
        "\n".join(rows) + "\n\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe "
        "as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n  NODE = "
        "Connection traversing PCIe as well as the interconnect between PCIe Host Bridges "
        "within a NUMA node"
    )


def _loop_seconds(options: dict[str, str]) -> float | None:
    if "loop-ms" in options:
        return max(0.01, int(options["loop-ms"]) / 1000)
    if "loop" in options:
        return max(0.01, float(options["loop"]))
    return None


def main(argv: Sequence[str]) -> int:
    """Run ``nvidia-smi argv``; the return value is the exit code."""
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # end quietly when the reader goes away
    if list(argv[:1]) == ["topo"]:
        print(_topology() if list(argv[1:]) == ["-m"] else INVALID)
        return 0 if list(argv[1:]) == ["-m"] else 2
    options = _options(argv)
    if options is None:
        print(INVALID)
        return 2
    if "list-gpus" in options:
        print("\n".join(f"GPU {g.index}: {GPU.name} (UUID: {g.uuid})" for g in snapshot()))
        return 0
    if "query-gpu" not in options and "query-compute-apps" not in options:
        if set(options) - {"id"}:
            print(INVALID)
            return 2
        print(_plain())
        return 0
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    interval, first = _loop_seconds(options), True
    while True:
        try:
            text = _query(options, first)
        except KeyError as field:
            print(f'Field "{field.args[0]}" is not a valid field to query.\n\n{INVALID}')
            return 2
        if text is None:
            print(INVALID)
            return 2
        if text:
            print(text, flush=True)
        if interval is None:
            return 0
        first = False
        try:
            time.sleep(interval)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
