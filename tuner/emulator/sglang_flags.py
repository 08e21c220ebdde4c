"""SGLang 0.5.9's ``launch_server`` flags as data: names, value types, defaults, choices.

The table, ``sglang_flags.json`` beside this module, was read once from the published sglang
0.5.9 wheel (``ServerArgs.add_cli_args`` run under a plain ``argparse.ArgumentParser``); only the
interface is kept, not the help texts. :mod:`tuner.emulator.cli_args` turns it into the
emulator's argument parser.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["DEPRECATED_SWITCHES", "EMULATOR_FLAGS", "OPTIONS", "SGLANG_VERSION", "SWITCHES"]

_TABLE = json.loads((Path(__file__).parent / "sglang_flags.json").read_text())

SGLANG_VERSION: str = _TABLE["sglang_version"]

# The emulator's own flags (tuner/emulator/cli_args.py), taken only by the emulated host.
EMULATOR_FLAGS = frozenset({"--time-scale", "--emulator-seed"})

# store_true flags (bare, no value); aliases share one string, space-separated.
SWITCHES: tuple[str, ...] = tuple(_TABLE["switches"])

# flags that take no value and only warn that they are deprecated.
DEPRECATED_SWITCHES: tuple[str, ...] = tuple(_TABLE["deprecated_switches"])


def _option(row: list[Any]) -> tuple[Any, ...]:
    """A row of the table with its choices as a tuple (the table names a list used by several
    flags, e.g. ``attention_backend``, and gives the others inline)."""
    names, type_name, default, choices, *rest = row
    if isinstance(choices, str):
        choices = _TABLE["choices"][choices]
    return (names, type_name, default, None if choices is None else tuple(choices), *rest)


# (option strings, value type, default, choices, nargs[, dest]) of the flags that take a value.
# A value type of "json" is parsed with json.loads.
OPTIONS: tuple[tuple[Any, ...], ...] = tuple(_option(row) for row in _TABLE["options"])
