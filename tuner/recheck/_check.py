"""The version check on the host: what the installed engine is, and what it breaks of a study.

Reads the three inputs of :func:`tuner.recheck._breaks.version_breaks` (the stored
configurations as they would launch now, the installed engine's ``--help``, each patch's file)
and returns a :class:`VersionCheck`. Reads only: it starts no server and writes nothing; run it
after the patches an earlier run left are reverted, so each file is its original.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import optuna
from rich.console import Console

from tuner.errors import ConfigError, TunerError
from tuner.recheck._breaks import (
    Break,
    EngineInterface,
    StoredLaunch,
    launch_flags,
    parse_help,
    version_breaks,
)
from tuner.study.loop import read_engine_version, server_environment
from tuner.study.record import ENGINE_VERSION, TrialRecord
from tuner.study.trial import Target

if TYPE_CHECKING:
    from tuner.patches import PatchManager
    from tuner.space import Config, SearchSpace

__all__ = [
    "VersionCheck",
    "check_version",
    "fit_config",
    "installed_interface",
    "say_version_breaks",
    "stored_launches",
    "stored_versions",
    "upgrade_check",
]


@dataclass(frozen=True)
class VersionCheck:
    """The installed engine against the versions a study's configurations ran on.

    ``stored``: version -> how many trials ran on it; ``breaks``: what the installed version no
    longer takes (empty: every stored configuration still launches as it did).
    """

    installed: str | None
    stored: dict[str, int]
    breaks: tuple[Break, ...]

    @property
    def broken(self) -> set[int]:
        """The stored trials the installed version cannot launch as they are."""
        return {number for b in self.breaks for number in b.trials}

    @property
    def changed(self) -> bool:
        """Whether any trial ran on another version than the installed one."""
        return any(version != self.installed for version in self.stored)

    def lines(self, study: str) -> list[str]:
        """What to print: the versions, then one line per break (nothing when no version changed
        and nothing broke)."""
        if not self.changed and not self.breaks:
            return []
        then = ", ".join(
            f"{v} ({n} trial{'s' if n != 1 else ''})" for v, n in sorted(self.stored.items())
        )
        head = f"engine: {self.installed or 'unknown'} installed; study {study} ran on {then or 'no version stored'}"
        if not self.breaks:
            return [head, "  every stored configuration's flags, values and patches still apply"]
        return [head, *(f"  breaks: {b.line()}" for b in self.breaks)]


def stored_versions(records: Iterable[TrialRecord]) -> dict[str, int]:
    """Engine version -> trials that ran on it (trials that stored none are left out)."""
    return dict(
        Counter(
            str(r.user_attrs[ENGINE_VERSION]) for r in records if r.user_attrs.get(ENGINE_VERSION)
        )
    )


def fit_config(space: SearchSpace, values: dict[str, Any]) -> Config:
    """A stored configuration fitted to ``space`` (parameters it lacks dropped, missing ones
    from its baseline), as a warm start fits one. Raises ConfigError when a value is outside
    the space's ranges."""
    kept = {name: value for name, value in values.items() if name in space.parameters}
    return space.config({**dict(space.baseline), **kept}, drop_inactive=True)


def stored_launches(space: SearchSpace, records: Iterable[TrialRecord]) -> list[StoredLaunch]:
    """Each stored configuration that ran (or is the baseline) as it would launch with ``space``
    now; one that no longer fits the space is left out (the space's own check reports it)."""
    found = []
    for record in records:
        if not record.config or not (record.ran or record.is_baseline):
            continue
        try:
            launch = space.render(fit_config(space, record.config), resolve=False)
        except ConfigError:
            continue
        found.append(
            StoredLaunch(record.number, launch_flags(launch.argv), tuple(sorted(launch.patches)))
        )
    return found


def installed_interface(space: SearchSpace, target: Target) -> EngineInterface:
    """The installed engine's version and ``--help`` (flags, choices), in the server's
    environment. Raises TunerError when ``--help`` gives nothing."""
    env = server_environment(space, target)
    version = read_engine_version(target, env)
    result = target.host.run(f"{target.command} --help", env=env, timeout=180.0)
    interface = parse_help(result.stdout + "\n" + result.stderr, version)
    if not interface.flags:
        raise TunerError(
            f"`{target.command} --help` gave {result.summary()}; fix: check that the engine "
            "is installed for host.python (`tuner doctor`)"
        )
    return interface


def _patch_files(space: SearchSpace, patches: PatchManager) -> dict[str, str | None]:
    """Patch name -> its file's text on the host (None: the package or file is not there)."""
    files: dict[str, str | None] = {}
    for name, spec in space.patches.items():
        try:
            files[name] = patches.host.read_file(patches.locate(spec)).decode(
                "utf-8", errors="surrogateescape"
            )
        except TunerError:
            files[name] = None
    return files


def check_version(
    space: SearchSpace,
    target: Target,
    patches: PatchManager,
    records: Iterable[TrialRecord],
    interface: EngineInterface | None = None,
) -> VersionCheck:
    """The installed engine (``interface``, read here when not given) against ``records``."""
    records = list(records)
    interface = interface or installed_interface(space, target)
    breaks = version_breaks(
        stored_launches(space, records),
        interface,
        {name: spec.find for name, spec in space.patches.items()},
        _patch_files(space, patches),
    )
    return VersionCheck(interface.version, stored_versions(records), tuple(breaks))


def say_version_breaks(
    study: optuna.Study,
    space: SearchSpace,
    target: Target,
    patches: PatchManager,
    say: Callable[[str], None],
    also: Iterable[TrialRecord] = (),
    name: str | None = None,
) -> VersionCheck | None:
    """For ``tuner optimize``: when a stored trial of ``study`` (or of ``also``, a study it
    starts from) ran on another version than the installed one, say what that change breaks.
    Reads ``--help`` only then; None when every stored trial ran on the installed version."""
    from tuner.study.record import read_view

    records = [*read_view(study, space).records, *also]
    stored = stored_versions(records)
    if not stored:
        return None
    version = read_engine_version(target, server_environment(space, target))
    if all(v == version for v in stored):
        return None
    check = check_version(space, target, patches, records)
    for line in check.lines(name or study.study_name):
        say(line)
    return check


def upgrade_check(
    study: optuna.Study,
    space: SearchSpace,
    target: Target,
    patches: PatchManager,
    console: Console,
    storage: str,
    from_study: str | None,
) -> VersionCheck | None:
    """``tuner optimize``'s version check: :func:`say_version_breaks` over the study and the
    study it starts from (``--from-study``)."""
    from tuner.study.record import read_view
    from tuner.study.storage import load_existing_study

    also = read_view(load_existing_study(storage, from_study), space).records if from_study else ()
    return say_version_breaks(
        study,
        space,
        target,
        patches,
        lambda line: console.print(line, highlight=False),
        also,
        f"{study.study_name} (with {from_study})" if from_study else None,
    )
