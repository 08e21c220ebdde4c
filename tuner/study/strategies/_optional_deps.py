"""Optional packages: a sampler or strategy that needs one checks for it before any host time.

The extras are declared in ``pyproject.toml`` (``pip install 'tuner[gp]'``). :func:`require_extra`
imports the extra's modules and raises a one-line :class:`ConfigError` (exit 2) naming the extra
when one is missing, so ``--sampler gp`` without torch stops at once instead of after the
baseline has run.
"""

from __future__ import annotations

import importlib

from tuner.errors import ConfigError

__all__ = ["EXTRAS", "SAMPLER_EXTRAS", "missing_modules", "require_extra", "require_sampler"]

# extra (pyproject.toml [project.optional-dependencies]) -> the modules it provides
EXTRAS: dict[str, tuple[str, ...]] = {
    "gp": ("torch", "scipy"),  # optuna's GPSampler
    "cmaes": ("cmaes",),  # optuna's CmaEsSampler
}
# --sampler name -> the extra it needs
SAMPLER_EXTRAS: dict[str, str] = {"gp": "gp", "cmaes": "cmaes"}


def missing_modules(modules: tuple[str, ...]) -> list[str]:
    """The modules that do not import here (a broken install counts as missing)."""
    missing = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    return missing


def require_extra(extra: str, what: str) -> None:
    """Raise when the modules of ``extra`` are not installed.

    Args:
        extra: a key of :data:`EXTRAS`.
        what: what needs it, as the user wrote it (``--sampler gp``).

    Raises:
        ConfigError: one line naming the missing modules and the extra to install.
    """
    missing = missing_modules(EXTRAS[extra])
    if missing:
        raise ConfigError(
            f"{what} needs {', '.join(missing)}, not installed here; fix: pip install "
            f"'tuner[{extra}]' (or pip install {' '.join(missing)}), or drop {what}"
        )


def require_sampler(name: str) -> None:
    """:func:`require_extra` for ``--sampler NAME`` (nothing for samplers without extras)."""
    if name in SAMPLER_EXTRAS:
        require_extra(SAMPLER_EXTRAS[name], f"--sampler {name}")
