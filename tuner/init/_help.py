"""The installed engine's flags, read from its own ``--help``: names, whether each takes a
value, and the values it allows.

Two help formats are read: argparse's (SGLang, vLLM: ``--tp-size TP_SIZE``, ``--attention-backend
{triton,fa3,...}``, ``--enable-chunked-prefill, --no-enable-chunked-prefill``) and click's
(``transformers serve``: ``--cb-block-size INTEGER``, ``--compile / --no-compile``,
``--reasoning [on|off|auto]``).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

__all__ = ["EngineFlags", "FlagInfo", "parse_help"]

# A flag, then optionally (after one space, `=`, or a line break inside argparse's usage) its
# value's name: an upper-case metavar, argparse's {choices} or click's [a|b] choices.
_OPTION = re.compile(
    r"(?<![\w-])(--[A-Za-z0-9][A-Za-z0-9_-]*)"
    r"(?:[ =](\{[^}]*\}|\[[a-z0-9_.|-]+\|[a-z0-9_.|-]+\]|[A-Z][A-Z0-9_]*(?![a-z])))?"
)


@dataclass(frozen=True)
class FlagInfo:
    """One flag of the engine: whether it takes a value (None: the help did not say), and its
    allowed values (None: any)."""

    takes_value: bool | None
    choices: tuple[str, ...] | None = None


@dataclass(frozen=True)
class EngineFlags:
    """The flags the installed engine declares."""

    flags: dict[str, FlagInfo]

    def known(self, flag: str) -> bool:
        """Whether the engine takes ``flag`` (a unique prefix counts, as argparse allows)."""
        return flag in self.flags or len([k for k in self.flags if k.startswith(flag)]) == 1

    def choices(self, flag: str) -> tuple[str, ...] | None:
        info = self.flags.get(flag)
        return info.choices if info else None

    def suggestion(self, flag: str) -> str | None:
        """The closest known flag's name, for a "did you mean"."""
        close = difflib.get_close_matches(flag, list(self.flags), n=1, cutoff=0.6)
        return close[0] if close else None

    def takes_value(self) -> dict[str, bool | None]:
        return {name: info.takes_value for name, info in self.flags.items()}


def _choices(token: str) -> tuple[str, ...] | None:
    if token.startswith("{"):
        return tuple(c.strip() for c in re.sub(r"\s+", "", token[1:-1]).split(",") if c.strip())
    if token.startswith("["):
        return tuple(token[1:-1].split("|"))
    return None


def parse_help(text: str) -> EngineFlags:
    """The flags of a ``--help`` text (argparse's or click's format)."""
    found: dict[str, FlagInfo] = {}
    for match in _OPTION.finditer(text):
        name, token = match.group(1), match.group(2)
        old = found.get(name, FlagInfo(None))
        takes = True if token else old.takes_value
        choices = _choices(token) if token else None
        found[name] = FlagInfo(takes, choices or old.choices)
    # click's and argparse's switches: `--x / --no-x` and `--x, --no-x` take no value
    for match in re.finditer(r"(--[A-Za-z0-9][\w-]*)\s*[/,]\s*(--no-[\w-]+)", text):
        for name in match.groups():
            found[name] = FlagInfo(False)
    # an argparse option line with no metavar (`  --trust-remote-code  ...`) is a switch
    for match in re.finditer(
        r"^\s{2}(--[A-Za-z0-9][\w-]*)(?:, -[\w-]+)?(?=\s{2,}|\n|$)", text, re.MULTILINE
    ):
        if found.get(match.group(1), FlagInfo(None)).takes_value is None:
            found[match.group(1)] = FlagInfo(False)
    for match in re.finditer(r"\[(--[A-Za-z0-9][\w-]*)\]", text):  # usage: [--switch]
        if found.get(match.group(1), FlagInfo(None)).takes_value is None:
            found[match.group(1)] = FlagInfo(False)
    found.pop("--help", None)
    return EngineFlags(found)
