"""What an engine version change breaks of stored configurations, before any host time.

Pure: the stored configurations' launches (:class:`StoredLaunch`: flags, values, patches), the
installed engine's interface (:class:`EngineInterface`: its flags and each flag's choices, read
from its ``--help``) and the text of each patch's file on the host in, the breaks out:

- a flag the installed engine does not know (renamed or removed; a unique prefix of a known flag
  is accepted, as argparse does, an ambiguous one is not);
- a value outside a flag's choices in this version;
- a patch whose find-text is no longer in its file exactly once (the file changed upstream).

``tuner recheck`` and ``tuner optimize`` call :func:`version_breaks` with the same inputs.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

__all__ = [
    "Break",
    "BreakKind",
    "EngineInterface",
    "StoredLaunch",
    "launch_flags",
    "parse_help",
    "version_breaks",
]

# An option string, and the ``{a,b,c}`` argparse prints after an option that has choices.
_OPTION = re.compile(r"(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9_-]*)(?:[ =]\{([^{}\s]*)\})?")


class BreakKind(Enum):
    """What kind of thing a version change broke."""

    UNKNOWN_FLAG = "unknown flag"
    NOT_A_CHOICE = "value not a choice"
    PATCH_GONE = "patch does not apply"


@dataclass(frozen=True)
class StoredLaunch:
    """A stored configuration as it would launch: ``flags`` (flag, value or None for a bare
    switch), in order; ``patches``: the source patches it applies; ``trial``: its trial number."""

    trial: int
    flags: tuple[tuple[str, str | None], ...]
    patches: tuple[str, ...] = ()


@dataclass(frozen=True)
class EngineInterface:
    """The installed engine's command line: its ``version``, every option string ``flags``, and
    ``choices``: option string -> the values it accepts (flags without choices absent)."""

    version: str | None
    flags: frozenset[str]
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Break:
    """One thing the installed engine no longer takes, and the stored trials that need it.

    ``what``: the flag (``--cuda-graph-max-bs``), ``--flag value``, or the patch's name;
    ``detail``: one line on why; ``trials``: the stored trials that need it, ascending.
    """

    kind: BreakKind
    what: str
    detail: str
    trials: tuple[int, ...]

    def line(self) -> str:
        shown = ", ".join(str(t) for t in self.trials[:8]) + (
            " ..." if len(self.trials) > 8 else ""
        )
        which = "trial" if len(self.trials) == 1 else "trials"
        return f"{self.kind.value}: {self.what}: {self.detail} ({which} {shown})"


def parse_help(text: str, version: str | None = None) -> EngineInterface:
    """The option strings and choices in an engine's ``--help`` output (argparse's format:
    ``--attention-backend {triton,flashinfer}``)."""
    flags: set[str] = set()
    choices: dict[str, tuple[str, ...]] = {}
    for name, listed in _OPTION.findall(text):
        flags.add(name)
        if listed:
            choices[name] = tuple(v for v in listed.split(",") if v)
    return EngineInterface(version, frozenset(flags), choices)


def launch_flags(argv: Sequence[str]) -> tuple[tuple[str, str | None], ...]:
    """(flag, value) pairs of a server command line, from its first ``--`` option on (the
    command before it is not the engine's flags); ``--flag=value`` split; a flag followed by
    another flag, or last, is a bare switch."""
    start = next((i for i, token in enumerate(argv) if token.startswith("--")), len(argv))
    pairs: list[tuple[str, str | None]] = []
    tokens = list(argv[start:])
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if not token.startswith("--"):  # a further value of a multi-value flag
            index += 1
            continue
        if "=" in token:
            name, value = token.split("=", 1)
            pairs.append((name, value))
            index += 1
            continue
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if following is not None and not following.startswith("--"):
            pairs.append((token, following))
            index += 2
        else:
            pairs.append((token, None))
            index += 1
    return tuple(pairs)


def _resolve(flag: str, known: frozenset[str]) -> tuple[str | None, str | None]:
    """The option string ``flag`` names (exact, or the one it is a unique prefix of), or None
    with why not."""
    if flag in known:
        return flag, None
    matches = sorted(k for k in known if k.startswith(flag))
    if len(matches) == 1:
        return matches[0], None
    if matches:
        return None, f"ambiguous: {', '.join(matches[:4])}"
    return None, "unknown"


def _similar(flag: str, known: Iterable[str]) -> str:
    """A known flag that shares the stored one's longest dash-separated stem (a rename's new
    name, most often), as a hint; empty when none shares at least two words."""
    words = flag.lstrip("-").split("-")
    for size in range(len(words) - 1, 1, -1):
        stem = "--" + "-".join(words[:size]) + "-"
        found = sorted(k for k in known if k.startswith(stem))
        if found:
            return f"; renamed? this version has {', '.join(found[:3])}"
    return ""


def version_breaks(
    launches: Iterable[StoredLaunch],
    engine: EngineInterface,
    patch_finds: Mapping[str, str],
    patch_files: Mapping[str, str | None],
) -> list[Break]:
    """Every break of ``launches`` on ``engine``, one per flag, value or patch (the trials that
    need it gathered), in the order first met.

    Args:
        launches: the stored configurations, as they would launch.
        engine: the installed engine's interface.
        patch_finds: patch name -> the text the patch finds.
        patch_files: patch name -> its file's text on the host (None: the file is not there).
    """
    found: dict[tuple[BreakKind, str], tuple[str, list[int]]] = {}

    def add(kind: BreakKind, what: str, detail: str, trial: int) -> None:
        entry = found.setdefault((kind, what), (detail, []))
        if trial not in entry[1]:
            entry[1].append(trial)

    version = engine.version or "the installed version"
    for launch in launches:
        for flag, value in launch.flags:
            name, why = _resolve(flag, engine.flags)
            if name is None:
                hint = _similar(flag, engine.flags) if why == "unknown" else ""
                add(BreakKind.UNKNOWN_FLAG, flag, f"{why} in {version}{hint}", launch.trial)
                continue
            allowed = engine.choices.get(name)
            if allowed and value is not None and value not in allowed:
                add(
                    BreakKind.NOT_A_CHOICE,
                    f"{flag} {shlex.quote(value)}",
                    f"{version} takes {', '.join(allowed[:8])}{' ...' if len(allowed) > 8 else ''}",
                    launch.trial,
                )
        for patch in launch.patches:
            text = patch_files.get(patch)
            find = patch_finds.get(patch)
            if find is None:
                continue
            if text is None:
                add(BreakKind.PATCH_GONE, patch, f"its file is not in {version}", launch.trial)
                continue
            count = text.count(find)
            if count != 1:
                why = (
                    "its find-text is not in the file"
                    if count == 0
                    else f"its find-text occurs {count} times"
                )
                add(BreakKind.PATCH_GONE, patch, f"{why} in {version}", launch.trial)
    return [
        Break(kind, what, detail, tuple(sorted(trials)))
        for (kind, what), (detail, trials) in found.items()
    ]
