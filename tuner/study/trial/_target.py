"""What a run talks to: the host, the engine, the command, and the emulated host when asked.

A :class:`Target` is built once per ``tuner optimize`` (or ``validate``/``export``) from the search
space and the command line. With ``--emulate`` the server command becomes the emulator
(``python -m tuner.emulator --time-scale K``), and the host gets the emulator's stand-in ``sglang``
package and ``nvidia-smi`` through its environment, so that every other step (patches, doctor,
telemetry, readiness, crashes) runs exactly as on a real host.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.engines import EngineProfile, load_profile
from tuner.errors import ConfigError
from tuner.handover import GpuState
from tuner.host import Host, HostSpec, open_host
from tuner.study.trial._placeholder_host import refuse_placeholder_host
from tuner.timescale import TimeScale

if TYPE_CHECKING:
    from tuner.space import HostSection, SearchSpace

__all__ = ["Target", "build_target", "parse_host_option"]


@dataclass
class Target:
    """The host, engine and command of one run, and the emulator's time scale (K=1 when real)."""

    host: Host
    profile: EngineProfile
    command: str
    env: dict[str, str]
    python: str
    port: int
    time_scale: TimeScale = field(default_factory=TimeScale)
    stop_command: str | None = None
    gpu_idle: GpuState | None = None  # measured after preflight: each start waits for it
    client_workers: int = 1  # load-generator processes that share each level (--client-workers)
    emulator_seed: int | None = (
        None  # the study's --seed: each emulated server run's noise is drawn from it
    )

    def server_command(self, trial_number: int, run: int = 0) -> str:
        """The command that starts the server for run ``run`` of trial ``trial_number``.

        On the emulated host of a seeded study the emulator's noise (a few percent a server run,
        as real restarts differ) is drawn from the study's seed, the trial's number and the run:
        the same seed gives the same figures, and every run still draws its own noise. A real
        host's command is the same for every run.
        """
        if not self.emulated or self.emulator_seed is None:
            return self.command
        seed = (self.emulator_seed * 1_000_003 + trial_number) * 101 + run
        return f"{self.command} --emulator-seed {seed}"

    @property
    def emulated(self) -> bool:
        return self.time_scale.emulated

    @property
    def run_root(self) -> str:
        """The run root on the host (absolute once :meth:`Host.secure_run_root` ran)."""
        return self.host.run_root

    @property
    def local(self) -> bool:
        """True when the server runs on this machine (it then binds to loopback only)."""
        return self.host.address in ("127.0.0.1", "localhost", "::1")

    def close(self) -> None:
        self.host.close()


def parse_host_option(value: str) -> dict[str, object]:
    """``--host [user@]address[:port]`` (or ``local``) as HostSpec fields; an IPv6 address is
    written in brackets (``me@[::1]:22``), as ssh and URLs write it."""
    if value == "local":
        return {"address": "local"}
    user, _, rest = value.rpartition("@")
    if rest.startswith("["):
        address, bracket, port = rest[1:].partition("]")
        port = port.removeprefix(":") if bracket and (not port or port.startswith(":")) else "x"
    else:
        address, _, port = rest.partition(":")
    if not address or (port and not port.isdigit()):
        raise ConfigError(
            f"--host {value}: not [user@]address[:port] or local; fix: write e.g. "
            "root@gpu-host:22, or an IPv6 address in brackets: root@[::1]:22"
        )
    fields: dict[str, object] = {"address": address}
    if user:
        fields["user"] = user
    if port:
        fields["port"] = int(port)
    return fields


def _host_spec(space_host: HostSection | None, override: str | None, emulate: bool) -> HostSpec:
    fields: dict[str, Any] = {}
    if space_host is not None and not emulate:
        fields = {
            "address": space_host.address,
            "user": space_host.user,
            "port": space_host.port,
            "key_path": os.path.expanduser(space_host.key) if space_host.key else None,
            "python": space_host.python,
            "run_root": space_host.run_root,
            "accept_new_host_key": space_host.accept_new_host_key,
            "forward": space_host.forward,
        }
    if emulate:
        fields = {"address": "local", "python": sys.executable}
    if override:
        fields.update(parse_host_option(override))
    return HostSpec(**{k: v for k, v in fields.items() if v is not None})


def build_target(
    space: SearchSpace,
    *,
    emulate: bool,
    host_override: str | None = None,
    key_path: str | None = None,
    known_hosts: str | None = None,
    accept_new_host_key: bool = False,
    port: int | None = None,
    emulated_root: Path | None = None,
) -> Target:
    """Open the host and work out the command and environment for this run."""
    refuse_placeholder_host(space, host_override=host_override, emulate=emulate)
    spec = _host_spec(getattr(space, "host", None), host_override, emulate)
    if key_path:
        spec = replace(spec, key_path=key_path)
    if known_hosts:
        spec = replace(spec, known_hosts=known_hosts)
    if accept_new_host_key:
        spec = replace(spec, accept_new_host_key=True)
    profile = load_profile(space.engine)
    env: dict[str, str] = {}
    command = space.command
    python = spec.python
    time_scale = TimeScale()
    if emulate:
        from tuner.emulator.host_root import prepare_host_root

        workload = space.workload_for(True)
        time_scale = TimeScale(float(workload.time_scale))
        root = emulated_root or Path("studies") / f"{space.path.stem}-emulated.host"
        env.update(prepare_host_root(root.resolve()))
        python = sys.executable
        # The emulated host's python3 wrapper runs this interpreter with this tuner importable
        # (its PYTHONPATH is only the stand-in sglang's site): the emulator is this tuner's.
        command = (
            f"{shlex.quote(str(root.resolve() / 'bin' / 'python3'))} -m tuner.emulator "
            f"--time-scale {time_scale.factor:g} "
            f"--stream-interval {workload.stream_interval}"
        )
        if not host_override or host_override == "local" or spec.run_root == HostSpec().run_root:
            spec = replace(spec, run_root=str(root.resolve() / "runs"))
    host = open_host(spec)
    return Target(
        host=host,
        profile=profile,
        command=command,
        env=env,
        python=python,
        port=port or space.server.port,
        time_scale=time_scale,
        stop_command=space.server.stop_command,
    )
