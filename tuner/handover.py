"""A clean handover between trials: the GPUs' idle state, and waiting for it before a start.

The previous server's tensor-parallel workers can outlive its stop for seconds, holding GPU
memory (real users call the next start's failure "phantom OOM"), and a killed run can leave a
worker holding memory for good. So the run measures the GPUs once, after preflight
(:func:`read_gpu_state`: memory in use per GPU, the compute processes ``nvidia-smi`` lists), and
every start first waits (:func:`wait_until_idle`, with a time limit) until each GPU is back
within a margin of that memory and no compute process is listed that was not there then.
A start that fails out of memory while another process held memory is the host's fault:
:func:`memory_held_elsewhere` says so, and the trial is ``host-error``, never ``oom-at-start``.
A host without ``nvidia-smi`` (a CPU host) has no GPU state: nothing is waited for.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from tuner.errors import HostError, TunerError

__all__ = [
    "HANDOVER_TIMEOUT_S",
    "MEMORY_MARGIN_MIB",
    "GpuApp",
    "GpuState",
    "memory_held_elsewhere",
    "read_gpu_state",
    "wait_until_idle",
]

HANDOVER_TIMEOUT_S = 120.0  # wall seconds: processes end and drivers free memory in real time
MEMORY_MARGIN_MIB = 1024.0  # a CUDA context's own overhead is about this much
_MARK = "@@tuner-gpu-state@@"

# One round trip: memory per GPU, the compute processes, and each one's process group.
_SCRIPT = f"""command -v nvidia-smi >/dev/null 2>&1 || exit 127
nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits || exit 3
echo {_MARK}
apps=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits) || exit 4
for a in $(printf '%s\\n' "$apps" | cut -d, -f1 | sort -u); do
  line=$(cat "/proc/$a/stat" 2>/dev/null) || line=""
  rest=${{line##*) }}
  set -- $rest
  mib=$(printf '%s\\n' "$apps" | awk -F', *' -v p="$a" '$1 == p {{ s += $2; n++ }} END {{ print s + 0, n + 0 }}')
  printf '%s %s %s\\n' "$a" "${{3:--}}" "$mib"
done
"""


@dataclass(frozen=True)
class GpuApp:
    """A compute process ``nvidia-smi`` lists: its PID, memory over all its GPUs, process group,
    and on how many GPUs it is listed."""

    pid: int
    memory_mib: float
    pgid: int | None
    gpus: int = 1

    def describe(self) -> str:
        return f"PID {self.pid} holds {self.memory_mib / max(1, self.gpus):.0f} MiB on {self.gpus} GPU(s)"


@dataclass(frozen=True)
class GpuState:
    """Memory in use per GPU (by index) and the compute processes, at one moment."""

    memory_mib: dict[int, float]
    apps: tuple[GpuApp, ...]

    def differences(self, idle: GpuState, margin_mib: float = MEMORY_MARGIN_MIB) -> list[str]:
        """What keeps this state from being ``idle``'s: processes not listed then, GPUs whose
        memory is above idle's by more than ``margin_mib``. Empty when idle again."""
        idle_pids = {app.pid for app in idle.apps}
        found = [app.describe() for app in self.apps if app.pid not in idle_pids]
        for index, used in sorted(self.memory_mib.items()):
            before = idle.memory_mib.get(index, 0.0)
            if used > before + margin_mib:
                found.append(f"GPU {index}: {used:.0f} MiB in use ({before:.0f} at preflight)")
        return found


def read_gpu_state(host: object, env: Mapping[str, str] | None = None) -> GpuState | None:
    """The GPUs' state now, or None on a host without ``nvidia-smi``.

    Raises:
        HostError: the host cannot be reached, or ``nvidia-smi`` fails.
    """
    result = host.run(_SCRIPT, env=env, timeout=60.0)  # type: ignore[attr-defined]
    if result.exit_code == 127:
        return None
    if not result.ok or _MARK not in result.stdout:
        raise HostError(f"{getattr(host, 'name', 'host')}: nvidia-smi failed ({result.summary()})")
    memory_text, _, apps_text = result.stdout.partition(_MARK)
    memory: dict[int, float] = {}
    for line in memory_text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) == 2 and cells[0].isdigit():
            try:
                memory[int(cells[0])] = float(cells[1])
            except ValueError:
                continue  # [N/A]
    apps = []
    for line in apps_text.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[0].isdigit():
            pgid = int(fields[1]) if fields[1].isdigit() else None
            apps.append(GpuApp(int(fields[0]), float(fields[2]), pgid, int(fields[3])))
    return GpuState(memory, tuple(apps))


def wait_until_idle(
    host: object,
    idle: GpuState,
    env: Mapping[str, str] | None = None,
    *,
    timeout_s: float = HANDOVER_TIMEOUT_S,
    margin_mib: float = MEMORY_MARGIN_MIB,
    poll_s: float = 0.5,
) -> float:
    """Wait until the GPUs are back to ``idle`` (see :meth:`GpuState.differences`).

    Returns:
        The seconds waited (0.0 when idle at once).

    Raises:
        HostError: still not idle after ``timeout_s`` (what holds them is named), or the host
            cannot be reached.
    """
    started = time.monotonic()
    polls = 0
    while True:
        state = read_gpu_state(host, env)
        if state is None:
            return 0.0
        found = state.differences(idle, margin_mib)
        waited = time.monotonic() - started
        if not found:
            return waited if polls else 0.0
        polls += 1
        if waited >= timeout_s:
            raise HostError(
                f"{getattr(host, 'name', 'host')}: the GPUs are not back to their idle state "
                f"{timeout_s:g} s after the previous server: {'; '.join(found)}; a process left "
                f"by an earlier run or another user: stop it or wait (this run tries again later)"
            )
        time.sleep(poll_s)


def memory_held_elsewhere(
    host: object,
    own_pgid: int,
    env: Mapping[str, str] | None = None,
    margin_mib: float = MEMORY_MARGIN_MIB,
) -> str | None:
    """Why a failed start may not be the configuration's fault: the compute processes not of the
    server (process group ``own_pgid``) that hold more than ``margin_mib`` now, in one line; None
    when there are none (or the state cannot be read)."""
    try:
        state = read_gpu_state(host, env)
    except TunerError:
        return None
    if state is None:
        return None
    others = [
        app.describe()
        for app in state.apps
        if app.pgid != own_pgid and app.memory_mib / max(1, app.gpus) > margin_mib
    ]
    return "; ".join(others) or None
