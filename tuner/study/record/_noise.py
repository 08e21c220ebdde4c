"""The study's run-to-run noise: what a figure's spread is never below.

An emulated study's stated noise (the emulator's ``noise.py``: sd 2% per server run, 1% per
stretch, so 2.2%), else the largest relative spread measured over the study's re-measured
trials (each read at one level of one configuration, none of its runs a lower bound: a spread
the client made is not the host's), else :data:`ASSUMED_NOISE` (a real restart differs by a
percent or two: assumed, until repeats are measured; a CPU or shared host can differ by far
more, docs/measurements.md, so a noisy host should state its own). The noise the search space
states for its host (``objective.noise``) is a floor: a spread measured over two or three runs
replaces it only when larger (two runs can agree by chance).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from tuner.emulator.noise import EPOCH_SD, RUN_SD
from tuner.study.record._record import TrialRecord

__all__ = ["ASSUMED_NOISE", "EMULATED_NOISE", "Noise", "noise_of"]

ASSUMED_NOISE = 0.02
EMULATED_NOISE = math.hypot(RUN_SD, EPOCH_SD)


@dataclass(frozen=True)
class Noise:
    """The study's relative run-to-run noise and where it comes from."""

    relative: float
    source: str


def noise_of(found: Iterable[TrialRecord], emulated: bool, stated: float | None = None) -> Noise:
    """The noise of a study whose trials are ``found``; ``stated``: the search space's
    ``objective.noise`` (see the module docstring)."""
    if emulated:
        return Noise(EMULATED_NOISE, "the emulator's stated noise (2% a run, 1% a stretch)")
    # like for like: a spread with a run that was a lower bound came partly from the client
    measured = [s.relative for r in found if (s := r.spread()) is not None and s.host_noise]
    if stated and (not measured or max(measured) < stated):
        # what the user knows of the host is a floor: two or three runs can agree by chance
        seen = (
            f"; the re-measures read {max(measured):.1%}" if measured else "; no re-measures yet"
        )
        return Noise(float(stated), f"stated in the search space (objective.noise{seen})")
    if measured:
        return Noise(max(measured), f"measured over {len(measured)} re-measured trial(s)")
    return Noise(ASSUMED_NOISE, "assumed (no re-measures yet)")
