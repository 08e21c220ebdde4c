"""Which SGLang the emulated host has installed: 0.5.9 (calibrated) or an emulated upgrade.

``$TUNER_EMULATOR_SGLANG_VERSION`` (default ``0.5.9``) picks it, for the emulated server, its
``--help`` and the stand-in ``sglang.__version__`` alike, so ``tuner recheck`` and ``tuner
optimize`` can be run against an engine upgrade without a GPU. ``0.5.10`` is INVENTED, not
SGLang's 0.5.10: it changes two things, the kinds of change real upgrades bring:

- a flag renamed: ``--cuda-graph-max-bs`` is ``--cuda-graph-max-batch-size`` (the old name is
  unknown: argparse exits 2, as SGLang does on a flag it does not have);
- an effect changed: ``--disable-radix-cache`` costs 12% instead of gaining 1% (the bookkeeping
  it saved is gone, and the scheduler now reads the radix tree to order the batch).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

__all__ = ["CALIBRATED", "VERSIONS", "VERSION_ENV", "EmulatedVersion", "installed"]

VERSION_ENV = "TUNER_EMULATOR_SGLANG_VERSION"
CALIBRATED = "0.5.9"


@dataclass(frozen=True)
class EmulatedVersion:
    """What differs in one emulated SGLang version from 0.5.9.

    ``renamed``: old flag -> new flag (the server-args name stays the old one's);
    ``radix_off_speed``: the rate multiplier of ``--disable-radix-cache``.
    """

    version: str
    renamed: dict[str, str] = field(default_factory=dict)
    radix_off_speed: float = 1.01


VERSIONS: dict[str, EmulatedVersion] = {
    CALIBRATED: EmulatedVersion(CALIBRATED),
    "0.5.10": EmulatedVersion(
        "0.5.10",
        renamed={"--cuda-graph-max-bs": "--cuda-graph-max-batch-size"},
        radix_off_speed=0.88,
    ),
}


def installed() -> EmulatedVersion:
    """The version ``$TUNER_EMULATOR_SGLANG_VERSION`` names (default 0.5.9).

    Raises:
        SystemExit: a version the emulator does not know (the server and ``sglang`` import
            stop with a message naming the known ones).
    """
    name = os.environ.get(VERSION_ENV, "").strip() or CALIBRATED
    if name not in VERSIONS:
        raise SystemExit(f"{VERSION_ENV}={name}: the emulator knows SGLang {', '.join(VERSIONS)}")
    return VERSIONS[name]
