"""The preflight checks of a search space on its target (``tuner doctor``, run first by optimize)."""

from __future__ import annotations

from typing import Any

from tuner import doctor
from tuner.patches import PatchManager
from tuner.study.target import Target

__all__ = ["preflight_checks"]


def preflight_checks(space: Any, target: Target, patches: PatchManager) -> list[doctor.Check]:
    """Run every check; each says pass or fail, with a fix."""
    host, env, profile = target.host, target.env, target.profile
    checks = [doctor.check_reachable(host)]
    if not checks[0].ok:
        return checks
    checks += [
        doctor.check_python(host, target.python, env),
        doctor.check_engine_version(host, target.python, env, profile.version_code, space.engine_version),
        doctor.check_gpus(host, None),
        doctor.check_gpus_idle(host),
        doctor.check_flags_known(host, f"{target.command} --help", env, space.flags()),
        doctor.check_port_free(host, target.port),
        doctor.check_disk(host, target.run_root),
        *doctor.check_patches(patches, list(space.patches.values())),
    ]
    return checks
