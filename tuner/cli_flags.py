"""Flags of a search space checked against the engine's recorded flag list, before any host time.

``tuner doctor`` asks the installed engine's ``--help`` on the host; this check needs no host: it
reads the flags recorded from the published engine (SGLang 0.5.9's ``launch_server``:
``tuner/emulator/sglang_flags.json``) when the space names that engine and version, so that a
misspelt flag (``--schedule-conservativness``) stops ``tuner optimize`` and its ``--dry-run`` with
the file, the line and the closest known flag. An engine or version with no recorded list is left
to ``tuner doctor``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tuner.cli_errors import did_you_mean
from tuner.errors import ConfigError

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = ["check_flags_known", "recorded_flags"]


def recorded_flags(engine: str, version: str | None) -> frozenset[str] | None:
    """Every flag the engine's recorded list holds, or None when none is recorded for it."""
    if engine != "sglang":
        return None
    from tuner.emulator.sglang_flags import DEPRECATED_SWITCHES, OPTIONS, SGLANG_VERSION, SWITCHES

    if version is not None and str(version) != SGLANG_VERSION:
        return None
    names = [name for entry in (*SWITCHES, *DEPRECATED_SWITCHES) for name in entry.split()]
    names += [name for row in OPTIONS for name in row[0].split()]
    return frozenset(names)


def _where(space: SearchSpace, flag: str) -> tuple[str | int, ...]:
    """The field of the space that puts ``flag`` on the command line."""
    if flag in space.model.server.flags:
        return ("server", "flags", flag)
    for name, param in space.model.parameters.items():
        if flag in param.flags():
            return (
                ("parameters", name, "flag")
                if getattr(param, "flag", None) == flag
                else ("parameters", name)
            )
    return ()


def check_flags_known(space: SearchSpace, emulate: bool = False) -> None:
    """Refuse the first flag of ``space`` its engine's recorded list does not hold.

    A unique prefix of a known flag passes, as argparse takes it; with ``emulate``, the
    emulated host's own flags (``--time-scale``, ``--emulator-seed``) pass too.

    Raises:
        ConfigError: ``file:line: parameters.NAME.flag: --x is not a flag of sglang 0.5.9; fix:
            did you mean --y?``.
    """
    known = recorded_flags(space.profile.name, space.model.engine_version)
    if known is None:
        return
    if emulate:
        from tuner.emulator.sglang_flags import EMULATOR_FLAGS

        known = known | EMULATOR_FLAGS
    for flag in space.flags():
        name = "--" + flag.split("=", 1)[0].lstrip("-")
        if name in known or sum(k.startswith(name) for k in known) == 1:
            continue
        path = _where(space, flag)
        line = space.document.line_of(path) if path else None
        field = ".".join(str(part) for part in path) or "flags"
        where = f"{space.path}:{line}" if line else str(space.path)
        hint = did_you_mean(name, known)
        fix = (
            f"{hint} (or drop it; `tuner doctor` checks against the installed engine)"
            if hint
            else "drop it or use a flag of `python -m sglang.launch_server --help`"
        )
        raise ConfigError(
            f"{where}: {field}: {name} is not a flag of {space.profile.name} "
            f"{space.model.engine_version}; fix: {fix}"
        )
