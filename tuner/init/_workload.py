"""The concurrency levels a written space measures at."""

from __future__ import annotations

from dataclasses import dataclass

from tuner.errors import ConfigError
from tuner.init._command import LaunchCommand

__all__ = ["DEFAULT_LEVELS", "LevelChoice", "choose_levels", "parse_levels"]

DEFAULT_LEVELS = [16, 64, 256]
_CAP_FLAGS = {"sglang": "--max-running-requests", "vllm": "--max-num-seqs"}


def parse_levels(text: str) -> list[int]:
    """``"64,256,1024"`` -> ``[64, 256, 1024]`` (positive and increasing), else exit 2."""
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        levels = []
    if not levels or min(levels) < 1 or levels != sorted(set(levels)):
        raise ConfigError(
            f"tuner init: --levels {text!r}: not increasing positive integers; "
            "fix: give e.g. --levels 64,256,1024"
        )
    return levels


@dataclass(frozen=True)
class LevelChoice:
    """The concurrency levels a written space measures at and where they came from.

    ``levels``: the concurrency levels, increasing; ``why``: the comment the space file writes
    beside them (``--levels``, the command's cap, or the levels assumed).
    """

    levels: list[int]
    why: str


def choose_levels(command: LaunchCommand, given: str | None) -> LevelChoice:
    """The levels and the comment that says where they came from."""
    if given:
        return LevelChoice(parse_levels(given), "--levels")
    flag = _CAP_FLAGS.get(command.engine)
    value = command.value(flag) if flag else None
    if isinstance(value, str) and value.isdigit() and int(value) > 0:
        cap = int(value)
        return LevelChoice(
            [cap, 4 * cap],
            f"your command's cap ({flag} {cap}), and 4x above it: does a higher "
            "cap pay? (--levels to change)",
        )
    return LevelChoice(
        list(DEFAULT_LEVELS),
        "the command sets no cap: 16 to 256 streams assumed (--levels to change)",
    )
