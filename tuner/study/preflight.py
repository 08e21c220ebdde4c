"""The preflight checks of a search space on its target (``tuner doctor``, run first by optimize)."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from tuner import doctor
from tuner.patches import PatchManager
from tuner.study.target import Target

__all__ = ["preflight_checks", "read_engine_version", "server_environment", "unavailable_patches",
           "PATCH_CHECK_PREFIX"]

PATCH_CHECK_PREFIX = "patch "


def unavailable_patches(checks: list[doctor.Check]) -> set[str]:
    """The patches whose check failed: their text is not in the host's file (never written)."""
    return {c.name.removeprefix(PATCH_CHECK_PREFIX) for c in checks if not c.ok and c.name.startswith(PATCH_CHECK_PREFIX)}


def server_environment(space: Any, target: Target) -> dict[str, str]:
    """The environment the server starts with: the baseline's (``server.env`` and its
    environment parameters, ``${NAME}`` resolved), then the target's (the emulated host's).
    Every check that runs the host's Python or the server command runs with it, so a
    ``PYTHONPATH`` or venv ``PATH`` given only in ``server.env`` is seen as the server sees it."""
    return {**space.render(space.baseline, local=target.local).env, **target.env}


def preflight_checks(space: Any, target: Target, patches: PatchManager) -> list[doctor.Check]:
    """Run every check, in the server's environment; each says pass or fail, with a fix."""
    host, env, profile = target.host, server_environment(space, target), target.profile
    checks = [doctor.check_reachable(host)]
    if not checks[0].ok:
        return checks
    left = doctor.left_servers(host)  # a killed tuner's: optimize stops them first
    checks += [
        doctor.check_python(host, target.python, env),
        doctor.check_engine_version(host, target.python, env, profile.version_code, space.engine_version),
        doctor.check_gpus(host, None, env),
        doctor.check_gpus_idle(host, env=env, left=left),
        doctor.check_flags_known(host, f"{target.command} --help", env, space.flags()),
        doctor.check_port_free(host, target.port, left),
        doctor.check_disk(host, target.run_root),
        doctor.check_host_claim(host, target.run_root),
        *doctor.check_patches(patches, list(space.patches.values())),
    ]
    return checks


def read_engine_version(target: Target, env: Mapping[str, str] | None = None) -> str | None:
    """The engine's version on the host (``sglang.__version__``), or None if it does not import.

    Args:
        env: the server's environment (:func:`server_environment`); default the target's.
    """
    command = f"{shlex.quote(target.python)} -c {shlex.quote(target.profile.version_code)}"
    result = target.host.run(command, env=target.env if env is None else env, timeout=120.0)
    lines = result.stdout.strip().splitlines()
    return lines[-1].strip() if result.ok and lines else None
