"""A clean handover between trials: the GPUs' idle state, and waiting for it before a start.

The previous server's tensor-parallel workers can outlive its stop for seconds, holding GPU
memory (real users call the next start's failure "phantom OOM"), and a killed run can leave a
worker holding memory for good. So the run measures the GPUs once, after preflight
(:func:`read_gpu_state`: memory in use per GPU, the compute processes ``nvidia-smi`` lists and on
which GPUs, the ``CUDA_VISIBLE_DEVICES`` the server will see), and every start first waits
(:func:`wait_until_idle`, with a time limit) until the GPUs are back to that state.

Only the GPUs the server will use are watched (:func:`server_gpus`: ``CUDA_VISIBLE_DEVICES``
in the server's environment, then the engine's device flags: SGLang's ``--base-gpu-id``,
``--gpu-id-step``, ``--tp-size``, ``--pp-size``, ``--dp-size``; vLLM's
``--tensor-parallel-size``, ``--pipeline-parallel-size``, ``--data-parallel-size``): another
user's job on another GPU of a shared host neither delays a start nor excuses its failure.
A process that was there at preflight and still holds the same memory is part of the host as
measured: nothing waits for it, and a start that then fails out of memory is the
configuration's (``oom-at-start``, so the memory cliff learns its limit). A start that fails out
of memory while a process that is new, or grew, holds memory on its GPUs is the host's fault:
:func:`memory_held_elsewhere` says so, and the trial is ``host-error``.
A host without ``nvidia-smi`` (a CPU host) has no GPU state: nothing is waited for.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tuner.errors import HostError, TunerError

if TYPE_CHECKING:
    from tuner.host import Host

__all__ = [
    "HANDOVER_TIMEOUT_S",
    "MEMORY_MARGIN_MIB",
    "GpuApp",
    "GpuState",
    "memory_held_elsewhere",
    "read_gpu_state",
    "server_gpus",
    "wait_until_idle",
]

HANDOVER_TIMEOUT_S = 120.0  # wall seconds: processes end and drivers free memory in real time
MEMORY_MARGIN_MIB = 1024.0  # a CUDA context's own overhead is about this much
_MARK = "@@tuner-gpu-state@@"
_UNSET = "@@unset@@"

# One round trip: the CUDA_VISIBLE_DEVICES the server will see (the host's environment plus
# the exported one), memory per GPU, the compute processes on each GPU, each one's process group.
_SCRIPT = f"""command -v nvidia-smi >/dev/null 2>&1 || exit 127
printf '%s\\n' "${{CUDA_VISIBLE_DEVICES-{_UNSET}}}"
echo {_MARK}
nvidia-smi --query-gpu=index,uuid,memory.used --format=csv,noheader,nounits || exit 3
echo {_MARK}
apps=$(nvidia-smi --query-compute-apps=pid,used_memory,gpu_uuid --format=csv,noheader,nounits) || exit 4
printf '%s\\n' "$apps"
echo {_MARK}
for a in $(printf '%s\\n' "$apps" | cut -d, -f1 | sort -u); do
  line=$(cat "/proc/$a/stat" 2>/dev/null) || line=""
  rest=${{line##*) }}
  set -- $rest
  printf '%s %s\\n' "$a" "${{3:--}}"
done
"""


@dataclass(frozen=True)
class GpuApp:
    """A compute process ``nvidia-smi`` lists: its PID, memory over all its GPUs, process group,
    on how many GPUs it is listed, and its memory on each (GPU index, MiB; index -1 for a GPU
    not in the index list)."""

    pid: int
    memory_mib: float
    pgid: int | None
    gpus: int = 1
    on: tuple[tuple[int, float], ...] = ()

    def describe(self) -> str:
        return f"PID {self.pid} holds {self.memory_mib / max(1, self.gpus):.0f} MiB on {self.gpus} GPU(s)"

    def on_gpus(self, indices: frozenset[int]) -> GpuApp | None:
        """This process as seen on ``indices`` only (None when it holds nothing there); a
        listing on a GPU of unknown index counts as on them."""
        kept = tuple((index, mib) for index, mib in self.on if index in indices or index < 0)
        if not self.on:
            return self
        if not kept:
            return None
        return GpuApp(self.pid, sum(mib for _, mib in kept), self.pgid, len(kept), kept)


@dataclass(frozen=True)
class GpuState:
    """Memory in use per GPU (by index) and the compute processes, at one moment.

    Attributes:
        memory_mib: MiB in use per GPU index.
        apps: the compute processes listed.
        uuids: each GPU's UUID by index (to read ``CUDA_VISIBLE_DEVICES=GPU-...``).
        visible_devices: ``CUDA_VISIBLE_DEVICES`` as the server will see it (None: unset).
    """

    memory_mib: dict[int, float]
    apps: tuple[GpuApp, ...]
    uuids: dict[int, str] = field(default_factory=dict)
    visible_devices: str | None = None

    def on_gpus(self, indices: frozenset[int] | None) -> GpuState:
        """This state restricted to the GPUs ``indices`` (all of them for None)."""
        if indices is None:
            return self
        apps = tuple(kept for app in self.apps if (kept := app.on_gpus(indices)) is not None)
        memory = {index: used for index, used in self.memory_mib.items() if index in indices}
        return GpuState(memory, apps, self.uuids, self.visible_devices)

    def differences(self, idle: GpuState, margin_mib: float = MEMORY_MARGIN_MIB) -> list[str]:
        """What keeps this state from being ``idle``'s: processes not listed then (or holding
        more than ``margin_mib`` more than then), GPUs whose memory is above idle's by more than
        ``margin_mib``. Empty when idle again."""
        found = [
            app.describe() for app in self.apps if not _as_at_preflight(app, idle, margin_mib)
        ]
        for index, used in sorted(self.memory_mib.items()):
            before = idle.memory_mib.get(index, 0.0)
            if used > before + margin_mib:
                found.append(f"GPU {index}: {used:.0f} MiB in use ({before:.0f} at preflight)")
        return found


def _as_at_preflight(app: GpuApp, idle: GpuState | None, margin_mib: float) -> bool:
    """True if ``app`` was listed in ``idle`` and holds no more than ``margin_mib`` more now (on
    each GPU where the listings say, else in all)."""
    if idle is None:
        return False
    before = next((seen for seen in idle.apps if seen.pid == app.pid), None)
    if before is None:
        return False
    if app.on and before.on:
        then = dict(before.on)
        return all(mib <= then.get(index, 0.0) + margin_mib for index, mib in app.on)
    return app.memory_mib <= before.memory_mib + margin_mib


def server_gpus(state: GpuState | None, argv: Sequence[str]) -> frozenset[int] | None:
    """The indices (as ``nvidia-smi`` numbers them) of the GPUs a server started with ``argv``
    uses, where ``state`` was read with the server's environment; None when that cannot be told
    (every GPU is then watched).

    ``CUDA_VISIBLE_DEVICES`` (numbers, or ``GPU-`` UUIDs or their prefixes) lists the devices
    the server sees, in order, as ``nvidia-smi`` numbers them (CUDA numbers them the same way
    with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and on a host of one kind of GPU). Of those, the
    server uses ``--base-gpu-id`` (0), then every ``--gpu-id-step`` (1)-th, as many as its
    tensor x pipeline (x data, without ``--enable-dp-attention``) parallel sizes, divided by
    ``--nnodes``: SGLang's and vLLM's rule.
    """
    if state is None:
        return None
    visible: list[int] = sorted(state.memory_mib) if state.visible_devices is None else []
    if state.visible_devices is not None:
        by_uuid = {uuid.lower(): index for index, uuid in state.uuids.items()}
        for entry in (part.strip() for part in state.visible_devices.split(",")):
            if entry.isdigit():
                found: int | None = int(entry)
            elif entry.lower().startswith("gpu-"):
                matches = [
                    index for uuid, index in by_uuid.items() if uuid.startswith(entry.lower())
                ]
                found = matches[0] if len(matches) == 1 else None
            else:
                found = None  # MIG-..., a typo: CUDA stops reading the list there
            if found is None:
                break
            visible.append(found)
    devices = _device_ordinals(argv)
    if devices is None or visible is None or any(ordinal >= len(visible) for ordinal in devices):
        return None
    return frozenset(visible[ordinal] for ordinal in devices)


_SIZE_FLAGS = {
    "tp": ("--tp-size", "--tensor-parallel-size", "-tp"),
    "pp": ("--pp-size", "--pipeline-parallel-size", "-pp"),
    "dp": ("--dp-size", "--data-parallel-size", "-dp"),
    "nnodes": ("--nnodes",),
    "base": ("--base-gpu-id",),
    "step": ("--gpu-id-step",),
}


def _device_ordinals(argv: Sequence[str]) -> tuple[int, ...] | None:
    """The device ordinals (within the visible devices) the engine flags in ``argv`` select;
    None when a value is not a number."""
    values = {name: 1 for name in _SIZE_FLAGS} | {"base": 0}
    names = {flag: name for name, flags in _SIZE_FLAGS.items() for flag in flags}
    words = list(argv)
    for position, word in enumerate(words):
        flag, equals, value = word.partition("=")
        if flag not in names:
            continue
        if not equals:
            value = words[position + 1] if position + 1 < len(words) else ""
        try:
            values[names[flag]] = int(value)
        except ValueError:
            return None
    dp = 1 if "--enable-dp-attention" in words else values["dp"]
    count = values["tp"] * values["pp"] * dp // max(1, values["nnodes"])
    if count < 1 or values["base"] < 0 or values["step"] < 1:
        return None
    return tuple(values["base"] + i * values["step"] for i in range(count))


def read_gpu_state(host: Host, env: Mapping[str, str] | None = None) -> GpuState | None:
    """The GPUs' state now, as a server started with ``env`` sees them, or None on a host
    without ``nvidia-smi``.

    Raises:
        HostError: the host cannot be reached, or ``nvidia-smi`` fails.
    """
    result = host.run(_SCRIPT, env=env, timeout=60.0)
    if result.exit_code == 127:
        return None
    parts = result.stdout.split(_MARK + "\n")
    if not result.ok or len(parts) != 4:
        raise HostError(f"{getattr(host, 'name', 'host')}: nvidia-smi failed ({result.summary()})")
    visible_text, memory_text, apps_text, groups_text = parts
    visible = visible_text.rstrip("\n")
    memory: dict[int, float] = {}
    uuids: dict[int, str] = {}
    for line in memory_text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) == 3 and cells[0].isdigit():
            uuids[int(cells[0])] = cells[1]
            try:
                memory[int(cells[0])] = float(cells[2])
            except ValueError:
                continue  # [N/A]
    index_of = {uuid: index for index, uuid in uuids.items()}
    groups: dict[int, int | None] = {}
    for line in groups_text.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit():
            groups[int(fields[0])] = int(fields[1]) if fields[1].isdigit() else None
    listed: dict[int, list[tuple[int, float]]] = {}
    for line in apps_text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != 3 or not cells[0].isdigit():
            continue
        try:
            mib = float(cells[1])
        except ValueError:
            mib = 0.0  # [N/A]: a process of another container
        listed.setdefault(int(cells[0]), []).append((index_of.get(cells[2], -1), mib))
    apps = tuple(
        GpuApp(pid, sum(mib for _, mib in on), groups.get(pid), len(on), tuple(on))
        for pid, on in sorted(listed.items())
    )
    return GpuState(memory, apps, uuids, None if visible == _UNSET else visible)


def wait_until_idle(
    host: Host,
    idle: GpuState,
    env: Mapping[str, str] | None = None,
    *,
    argv: Sequence[str] | None = None,
    timeout_s: float = HANDOVER_TIMEOUT_S,
    margin_mib: float = MEMORY_MARGIN_MIB,
    poll_s: float = 0.5,
) -> float:
    """Wait until the GPUs a server started with ``argv`` uses (every GPU without ``argv``; see
    :func:`server_gpus`) are back to ``idle`` (see :meth:`GpuState.differences`).

    Returns:
        The seconds waited (0.0 when idle at once).

    Raises:
        HostError: still not idle after ``timeout_s`` (what holds them is named), or the host
            cannot be reached.
    """
    gpus = server_gpus(idle, argv) if argv is not None else None
    started = time.monotonic()
    polls = 0
    while True:
        state = read_gpu_state(host, env)
        if state is None:
            return 0.0
        found = state.on_gpus(gpus).differences(idle.on_gpus(gpus), margin_mib)
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
    host: Host,
    own_pgid: int,
    env: Mapping[str, str] | None = None,
    margin_mib: float = MEMORY_MARGIN_MIB,
    *,
    idle: GpuState | None = None,
    argv: Sequence[str] | None = None,
) -> str | None:
    """Why a failed start may not be the configuration's fault: the compute processes not of the
    server (process group ``own_pgid``) that hold more than ``margin_mib`` a GPU now, on the GPUs
    a server started with ``argv`` uses (every GPU without ``argv``), in one line; None when
    there are none (or the state cannot be read). A process listed in ``idle`` (measured at
    preflight) that holds no more than it did then is the host as measured, not counted."""
    try:
        state = read_gpu_state(host, env)
    except TunerError:
        return None
    if state is None:
        return None
    gpus = server_gpus(idle or state, argv) if argv is not None else None
    others = [
        app.describe()
        for app in state.on_gpus(gpus).apps
        if app.pgid != own_pgid
        and app.memory_mib / max(1, app.gpus) > margin_mib
        and not _as_at_preflight(app, idle, margin_mib)
    ]
    return "; ".join(others) or None
