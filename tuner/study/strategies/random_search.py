"""``random``: Optuna's random sampler, no proposals (the reference every strategy must beat)."""

from __future__ import annotations

import optuna

from tuner.study.strategies._base import SpaceStrategy

__all__ = ["RandomStrategy"]


class RandomStrategy(SpaceStrategy):
    """Optuna's random sampler with the study's seed."""

    name = "random"

    def sampler(self) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=self.seed)
