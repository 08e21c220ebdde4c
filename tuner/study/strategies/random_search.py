"""``random``: Optuna's random sampler, no proposals (the reference every strategy must beat)."""

from __future__ import annotations

from typing import Any

import optuna

from tuner.study.strategies._base import Strategy

__all__ = ["RandomStrategy"]


class RandomStrategy(Strategy):
    name = "random"

    def __init__(self, space: Any, seed: int | None) -> None:
        self.space = space
        self.seed = seed

    def sampler(self) -> optuna.samplers.BaseSampler:
        return optuna.samplers.RandomSampler(seed=self.seed)
