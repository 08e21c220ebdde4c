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
from dataclasses import dataclass, field

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
    # every spelling of a flag the help lists under several (``--tensor-parallel-size``, ``-tp``)
    # -> the first long one listed: the key the spellings share
    aliases: dict[str, str] = field(default_factory=dict)

    def known(self, flag: str) -> bool:
        """Whether the engine takes ``flag`` (a unique prefix counts, as argparse allows)."""
        return self.expand(flag) in self.flags

    def expand(self, flag: str) -> str:
        """The option ``flag`` stands for as the engine's parser reads it: itself when the help
        lists it, else the one option it is a prefix of (argparse's abbreviations: ``--tp`` for
        ``--tp-size``; two or more options is ambiguous there, and here ``flag`` itself)."""
        if flag in self.flags or not flag.startswith("--"):
            return flag
        matches = [name for name in self.flags if name.startswith(flag)]
        return matches[0] if len(matches) == 1 else flag

    def key(self, flag: str) -> str:
        """What every spelling of ``flag`` shares: its first long name in the help."""
        expanded = self.expand(flag)
        return self.aliases.get(expanded, expanded)

    def spellings(self, flag: str) -> tuple[str, ...]:
        """Every name the help lists for ``flag`` (itself alone when it has one)."""
        key = self.key(flag)
        return tuple(name for name, of in self.aliases.items() if of == key) or (key,)

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
    aliases = _aliases(text, found)
    for name in ("--help", "-h"):
        found.pop(name, None)
        aliases.pop(name, None)
    return EngineFlags(found, aliases)


def _aliases(text: str, found: dict[str, FlagInfo]) -> dict[str, str]:
    """The spellings of each argparse option line that names several (``--tensor-parallel-size
    TENSOR_PARALLEL_SIZE, -tp TENSOR_PARALLEL_SIZE``), each to the first long one; a short
    spelling joins ``found`` with its flag's info. ``--x, --no-x`` (a switch's two halves) and
    click's ``--x / --no-x`` are two flags, not spellings of one."""
    aliases: dict[str, str] = {}
    for match in re.finditer(r"^ {2}(-[^\n]*?)(?= {2,}|$)", text, re.MULTILINE):
        names = [piece.split()[0] for piece in match.group(1).split(", ") if piece.startswith("-")]
        names = [n for n in names if not (n.startswith("--no-") and "--" + n[5:] in names)]
        longs = [n for n in names if n.startswith("--")]
        if len(names) < 2 or not longs:
            continue
        info = next((found[n] for n in longs if n in found), FlagInfo(None))
        for name in names:
            aliases[name] = longs[0]
            found.setdefault(name, info)
    return aliases
