"""The emulated server's tensor-parallel worker: it can outlive the server, holding GPU memory.

Real SGLang runs one scheduler process per GPU; after a stop (or a crash) they can go on holding
their memory for seconds, and a killed run can leave one behind for good. The next server then
fails out of memory at start ("phantom OOM"). With ``$TUNER_EMULATOR_WORKER_LINGER_S`` set (wall
seconds; unset or 0: no worker), :func:`start_worker` forks one such worker. It runs in a session
of its own (as a launcher's worker would: a signal to the server's process group does not reach
it), follows the server's memory (and its GPUs) in the published GPU state, and once the server has ended (or
on SIGTERM) holds that memory, listed by ``nvidia-smi`` under its own PID, for the linger time,
then exits. A large value (3600) leaves an orphan that holds memory until it is killed.
"""

from __future__ import annotations

import os
import signal
import time

from tuner.emulator import gpu_state

__all__ = ["LINGER_ENV", "linger_seconds", "start_worker"]

LINGER_ENV = "TUNER_EMULATOR_WORKER_LINGER_S"
_POLL_S = 0.1


def linger_seconds() -> float:
    """The linger time ``$TUNER_EMULATOR_WORKER_LINGER_S`` asks for (0: no worker)."""
    try:
        return max(0.0, float(os.environ.get(LINGER_ENV, "0") or 0))
    except ValueError:
        return 0.0


def start_worker() -> int | None:
    """Fork the worker (call before the event loop starts); its PID, or None without one."""
    linger_s = linger_seconds()
    if linger_s <= 0:
        return None
    server = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:
        _run(server, linger_s)
    finally:
        os._exit(0)


def _server_load(server: int) -> gpu_state.GpuLoad | None:
    for load in gpu_state.read_loads():
        if load.pid == server:
            return load
    return None


def _run(server: int, linger_s: float) -> None:
    os.setsid()
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    held, gpus = 0, None
    while not stopping and os.getppid() == server:
        load = _server_load(server)
        if load is not None:
            held, gpus = load.memory_used_mib, load.gpus
        time.sleep(_POLL_S)
    if held <= 0:
        return
    me = os.getpid()
    until = time.monotonic() + linger_s
    while time.monotonic() < until:
        gpu_state.write_load(
            gpu_state.GpuLoad(me, "stopping", held, updated=gpu_state.now(), gpus=gpus)
        )
        time.sleep(min(1.0, max(0.0, until - time.monotonic())))
    gpu_state.clear_load(me)
