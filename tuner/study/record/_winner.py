"""A winner beyond noise: the study's run-to-run noise, the close pair of the best and the
runner-up, and the winner's lines (with a tie when there is one).

The re-measures of the close pair run in the optimize loop (:mod:`tuner.study.loop._confirm`);
what they measured is read here (each trial's :class:`Spread`).

**Noise.** The spread the pair is compared with: an emulated study's stated noise (the
emulator's ``noise.py``: sd 2% per server run, 1% per stretch, so 2.2%), else the largest
relative spread measured over the study's re-measured trials, else :data:`ASSUMED_NOISE` (a
real restart differs by a percent or two: assumed, until repeats are measured).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import optuna

from tuner.emulator.noise import EPOCH_SD, RUN_SD
from tuner.study.record._keys import EMULATED
from tuner.study.record._record import TrialRecord
from tuner.study.record._results import records, stable_candidates
from tuner.study.record._spread import tied

__all__ = ["ASSUMED_NOISE", "CONFIRM_RUNS", "EMULATED_NOISE", "Noise", "close_pair", "study_noise", "winner_lines"]

CONFIRM_RUNS = 3  # runs of each of a close pair before the winner is told (the loop re-measures)
ASSUMED_NOISE = 0.02
EMULATED_NOISE = math.hypot(RUN_SD, EPOCH_SD)


@dataclass(frozen=True)
class Noise:
    """The study's relative run-to-run noise and where it comes from."""

    relative: float
    source: str


def study_noise(study: optuna.Study) -> Noise:
    """See the module docstring, **Noise**."""
    if study.user_attrs.get(EMULATED):
        return Noise(EMULATED_NOISE, "the emulator's stated noise (2% a run, 1% a stretch)")
    measured = [s.relative for r in records(study) if (s := r.spread()) is not None and s.runs > 1]
    if measured:
        return Noise(max(measured), f"measured over {len(measured)} re-measured trial(s)")
    return Noise(ASSUMED_NOISE, "assumed (no re-measures yet)")




def close_pair(found: list[TrialRecord], noise: float) -> tuple[TrialRecord, TrialRecord] | None:
    """The best and the runner-up stable trials when they are within the spread of each other."""
    ranked = sorted(stable_candidates(found), key=lambda r: r.rank, reverse=True)
    if len(ranked) < 2:
        return None
    best, second = ranked[0].spread(noise), ranked[1].spread(noise)
    if best is None or second is None or best.mean - second.mean > max(best.sd, second.sd):
        return None
    return ranked[0], ranked[1]


def winner_lines(study: optuna.Study, unit: str = "tok/s") -> list[str]:
    """The best stable trial with its spread, and a tie with the runner-up when there is one."""
    noise = study_noise(study)
    ranked = sorted(stable_candidates(records(study)), key=lambda r: r.rank, reverse=True)
    if not ranked:
        return []
    first = ranked[0].spread(noise.relative)
    lines = [f"winner: trial {ranked[0].number}: {first.text(unit)}"]
    if len(ranked) > 1:
        second = ranked[1].spread(noise.relative)
        if tied(first, second):
            lines.append(
                f"tied: trial {ranked[0].number} ({first.text(unit)}) and trial {ranked[1].number} "
                f"({second.text(unit)}) are within each other's spread (noise {noise.relative:.1%}: "
                f"{noise.source}); either may be exported"
            )
    return lines
