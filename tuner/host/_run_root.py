"""The run root on the host: per user by default, created 0700, refused when others can write it.

Run folders hold server logs, PID records the tuner signals, the host claim and the patch
journal (which names files the tuner restores). Another user who can write there could make the
tuner signal or overwrite what they choose, so a run root owned by someone else, or writable by
group or others, is refused before the host is used (:class:`~tuner.errors.ConfigError`, exit 2).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from tuner.errors import HostError

__all__ = ["DEFAULT_RUN_ROOT", "RunRootState", "inspect_run_root"]

DEFAULT_RUN_ROOT = "~/.cache/tuner/runs"


@dataclass(frozen=True)
class RunRootState:
    """What the host says of a run root: None fields when it does not exist yet."""

    path: str
    exists: bool
    owner_uid: int | None = None
    owner_name: str = ""
    mode: int | None = None
    my_uid: int | None = None

    def problem(self) -> str | None:
        """Why this run root is refused (one line with the fix), or None when it is safe."""
        if not self.exists:
            return None
        if self.owner_uid != self.my_uid:
            return (
                f"host.run_root: {self.path} is owned by {self.owner_name or self.owner_uid}, not "
                f"by the tuner's user (uid {self.my_uid}): another user could plant the records "
                f"the tuner acts on; fix: set host.run_root to a folder of your own "
                f"(default {DEFAULT_RUN_ROOT})"
            )
        if self.mode is not None and self.mode & 0o022:
            return (
                f"host.run_root: {self.path} is writable by group or others (mode "
                f"{self.mode:04o}); fix: chmod 700 {shlex.quote(self.path)}, or set host.run_root "
                f"to a folder of your own (default {DEFAULT_RUN_ROOT})"
            )
        return None


def _script(path: str, create: bool) -> str:
    """Print the run root's absolute path, then ``UID MODE OWNER`` (or ``missing``), then
    ``id -u``. ``~/`` is the host user's home; ``create`` makes it (umask 077: mode 0700)."""
    if path == "~" or path.startswith("~/"):
        rest = path[2:] if path.startswith("~/") else ""
        target = '"$HOME"/' + shlex.quote(rest) if rest else '"$HOME"'
    else:
        target = shlex.quote(path)
    make = '[ -e "$root" ] || (umask 077 && mkdir -p -- "$root") || exit 3\n' if create else ""
    return (
        f"root={target}\n"
        + make
        + 'printf "%s\\n" "$root"\n'
        + 'if [ -e "$root" ]; then stat -L -c "%u %a %U" -- "$root" || exit 4; '
        + "else echo missing; fi\n"
        + "id -u\n"
    )


class _Ran(Protocol):
    """What the check reads of a command's result (:class:`tuner.host.CommandResult` is one)."""

    @property
    def stdout(self) -> str: ...

    @property
    def ok(self) -> bool: ...

    def summary(self) -> str: ...


class _RunsCommands(Protocol):
    """What the check needs of a host (:class:`tuner.host.Host` is one)."""

    def run(
        self, command: str, *, timeout: float = 60.0, env: Mapping[str, str] | None = None
    ) -> _Ran: ...


def inspect_run_root(host: _RunsCommands, path: str, *, create: bool = False) -> RunRootState:
    """Ask the host about ``path`` (made first with ``create``).

    Raises:
        HostError: the host cannot be reached, or the folder cannot be created.
    """
    result = host.run(_script(path, create), timeout=60.0)
    lines = result.stdout.splitlines()
    if not result.ok or len(lines) < 3:
        raise HostError(
            f"{getattr(host, 'name', 'host')}: preparing run root {path} failed "
            f"({result.summary()})"
        )
    absolute, stat_line, uid = lines[0], lines[1].split(), lines[2].strip()
    if stat_line == ["missing"]:
        return RunRootState(absolute, False, my_uid=int(uid) if uid.isdigit() else None)
    return RunRootState(
        absolute,
        True,
        owner_uid=int(stat_line[0]),
        owner_name=stat_line[2] if len(stat_line) > 2 else "",
        mode=int(stat_line[1], 8),
        my_uid=int(uid),
    )
