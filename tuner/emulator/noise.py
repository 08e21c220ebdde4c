"""The emulated host's noise: a few percent, seeded, slow enough to show between levels.

Real restarts differ by a percent or two and a long level wanders a little. :class:`Noise` draws
one factor per server run (sd 2%, clipped to +-4%) and multiplies it by a slower wander that is
drawn again every :data:`EPOCH_CALLS` timed actions (sd 1%, clipped to +-2.5%). Durations are
multiplied by the factor; throughput moves by its inverse.
"""

from __future__ import annotations

import random

__all__ = ["EPOCH_CALLS", "Noise"]

EPOCH_CALLS = 200
RUN_SD, RUN_CLIP = 0.02, 0.04
EPOCH_SD, EPOCH_CLIP = 0.01, 0.025


def _clipped_normal(rng: random.Random, sd: float, clip: float) -> float:
    return 1.0 + max(-clip, min(clip, rng.gauss(0.0, sd)))


class Noise:
    """Multiplicative noise on durations.

    Args:
        rng: the source of randomness (seeded by ``--emulator-seed``).
    """

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self.run_factor = _clipped_normal(rng, RUN_SD, RUN_CLIP)
        self._epoch_factor = 1.0
        self._calls = 0

    def factor(self) -> float:
        """The factor for the next timed action."""
        if self._calls % EPOCH_CALLS == 0:
            self._epoch_factor = _clipped_normal(self._rng, EPOCH_SD, EPOCH_CLIP)
        self._calls += 1
        return self.run_factor * self._epoch_factor
