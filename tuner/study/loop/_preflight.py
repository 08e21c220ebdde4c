"""The preflight checks of a search space on its target (``tuner doctor``, run first by optimize)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tuner import doctor
from tuner.errors import ConfigError, TunerError
from tuner.handover import read_gpu_state, server_gpus
from tuner.host._run_root import inspect_run_root
from tuner.patches import PatchManager
from tuner.study.record import TOKENS_PER_JOULE
from tuner.study.trial import Target

if TYPE_CHECKING:
    from tuner.host import Host
    from tuner.space import SearchSpace

__all__ = [
    "check_run_root",
    "preflight_checks",
    "read_engine_version",
    "require_power",
    "server_environment",
    "unavailable_patches",
    "PATCH_CHECK_PREFIX",
]

PATCH_CHECK_PREFIX = "patch "


def unavailable_patches(checks: list[doctor.Check]) -> set[str]:
    """The patches whose check failed: their text is not in the host's file (never written)."""
    return {
        c.name.removeprefix(PATCH_CHECK_PREFIX)
        for c in checks
        if not c.ok and c.name.startswith(PATCH_CHECK_PREFIX)
    }


def server_environment(space: SearchSpace, target: Target) -> dict[str, str]:
    """The environment the server starts with: the baseline's (``server.env`` and its
    environment parameters, ``${NAME}`` resolved), then the target's (the emulated host's).
    Every check that runs the host's Python or the server command runs with it, so a
    ``PYTHONPATH`` or venv ``PATH`` given only in ``server.env`` is seen as the server sees it."""
    return {**space.render(space.baseline, local=target.local).env, **target.env}


def preflight_checks(
    space: SearchSpace, target: Target, patches: PatchManager
) -> list[doctor.Check]:
    """Run every check, in the server's environment; each says pass or fail, with a fix."""
    host, env, profile = target.host, server_environment(space, target), target.profile
    checks = [doctor.check_reachable(host)]
    if not checks[0].ok:
        return checks
    left = doctor.left_servers(host)  # a killed tuner's: optimize stops them first
    checks += [
        check_run_root(host),
        doctor.check_python(host, target.python, env),
        doctor.check_engine_version(
            host, target.python, env, profile.version_code, space.engine_version
        ),
        doctor.check_gpus(host, None, env),
        doctor.check_gpus_idle(
            host, env=env, left=left, server_gpus=_baseline_gpus(space, target, env)
        ),
        doctor.check_flags_known(host, f"{target.command} --help", env, space.flags()),
        doctor.check_port_free(host, target.port, left),
        doctor.check_disk(host, target.run_root),
        doctor.check_host_claim(host, target.run_root),
        *doctor.check_patches(patches, list(space.patches.values())),
    ]
    if not target.emulated:  # the emulator's figures are on its own clock, not the client's
        workload = space.workload
        checks.append(
            doctor.check_client_capacity(
                host,
                target.run_root,
                target.python,
                list(workload.levels),
                workload.output_len,
                target.client_workers,
            )
        )
    return checks


def _baseline_gpus(
    space: SearchSpace, target: Target, env: Mapping[str, str]
) -> frozenset[int] | None:
    """The GPUs the baseline's server will use (None: every GPU, when that cannot be told)."""
    try:
        return server_gpus(
            read_gpu_state(target.host, env), space.render(space.baseline, local=target.local).argv
        )
    except TunerError:
        return None


def check_run_root(host: Host) -> doctor.Check:
    """The run root is the user's own and closed to others (read only: made at the run's start).

    Also makes ``host.run_root`` absolute (``~/`` is the host user's home) for the checks after it.
    """
    try:
        state = inspect_run_root(host, host.run_root)
    except TunerError as error:
        return doctor.Check(
            "run root", False, str(error), "make the host reachable, then run doctor again"
        )
    host.run_root = state.path
    problem = state.problem()
    if problem:
        detail, _, fix = problem.partition("; fix: ")
        return doctor.Check("run root", False, detail.removeprefix("host.run_root: "), fix)
    if not state.exists:
        return doctor.Check("run root", True, f"{state.path} is created 0700 at the start")
    return doctor.Check("run root", True, f"{state.path} is yours, mode {state.mode:04o}")


def read_engine_version(target: Target, env: Mapping[str, str] | None = None) -> str | None:
    """The engine's version on the host (``sglang.__version__``), or None if it does not import.

    Args:
        env: the server's environment (:func:`server_environment`); default the target's.
    """
    command = f"{shlex.quote(target.python)} -c {shlex.quote(target.profile.version_code)}"
    result = target.host.run(command, env=target.env if env is None else env, timeout=120.0)
    lines = result.stdout.strip().splitlines()
    return lines[-1].strip() if result.ok and lines else None


def require_power(space: SearchSpace, gpu_state: Any) -> None:
    """Refuse ``objective.metric: tokens_per_joule`` on a host without ``nvidia-smi`` (before
    any trial: no level could be ranked)."""
    if space.objective.metric == TOKENS_PER_JOULE and gpu_state is None:
        raise ConfigError(
            f"{space.path}: objective.metric: tokens_per_joule needs GPU power, and the host has "
            "no nvidia-smi; fix: use metric output_throughput on this host"
        )
