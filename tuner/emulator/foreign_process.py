"""Another user's job on the emulated host: ``python -m tuner.emulator.foreign_process``.

``--gpus 0,1 --mib 23456`` holds that much memory on each of those GPUs, listed by the stand-in
``nvidia-smi`` under this process's PID (as a compute process of another user), until it is
stopped (SIGTERM or SIGINT) or ``--seconds`` have passed. An emulated server that starts on one
of those GPUs counts that memory as taken (it runs out of memory when the rest is too little).
It publishes through ``$TUNER_EMULATOR_STATE`` like a server; without it, it exits 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Sequence

from tuner.emulator import gpu_state

__all__ = ["main"]

_PERIOD_S = 0.5


def _gpus(text: str) -> tuple[int, ...]:
    try:
        gpus = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--gpus {text!r}: give GPU numbers, e.g. 0 or 4,5"
        ) from None
    if not gpus or min(gpus) < 0:
        raise argparse.ArgumentTypeError(f"--gpus {text!r}: give GPU numbers, e.g. 0 or 4,5")
    return gpus


def main(argv: Sequence[str] | None = None) -> int:
    """Hold the memory until stopped; the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m tuner.emulator.foreign_process", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--gpus", type=_gpus, required=True, help="GPU numbers, e.g. 0 or 4,5")
    parser.add_argument("--mib", type=int, default=23_456, help="MiB held on each GPU")
    parser.add_argument("--seconds", type=float, default=None, help="end after this long")
    args = parser.parse_args(argv)
    if not os.environ.get(gpu_state.STATE_ENV):
        print(
            f"python -m tuner.emulator.foreign_process: ${gpu_state.STATE_ENV} is not set: "
            "run it with the emulated host's environment (tuner.emulator.prepare_host_root)",
            file=sys.stderr,
        )
        return 2
    stopping: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda number, _frame: stopping.append(number))
    me = os.getpid()
    until = None if args.seconds is None else time.monotonic() + args.seconds
    try:
        while not stopping and (until is None or time.monotonic() < until):
            gpu_state.write_load(
                gpu_state.GpuLoad(me, "foreign", args.mib, updated=gpu_state.now(), gpus=args.gpus)
            )
            time.sleep(_PERIOD_S)
    finally:
        gpu_state.clear_load(me)
    return 0


if __name__ == "__main__":
    sys.exit(main())
