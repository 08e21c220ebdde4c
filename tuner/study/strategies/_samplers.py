"""Strategies that are an Optuna sampler alone: ``--sampler gp`` (and the others Optuna offers),
and the study's own sampler when the optimize loop is called without a strategy."""

from __future__ import annotations

from typing import Any

import optuna

from tuner.study.strategies._base import Strategy
from tuner.study.storage import make_sampler

__all__ = ["SamplerStrategy", "StudySampler"]


class SamplerStrategy(Strategy):
    """One of Optuna's samplers by its ``--sampler`` name, no proposals."""

    def __init__(self, sampler_name: str, seed: int | None) -> None:
        self.name = sampler_name
        self._sampler = make_sampler(sampler_name, seed)  # an unknown name: ConfigError

    def sampler(self) -> optuna.samplers.BaseSampler:
        return self._sampler


class StudySampler(Strategy):
    """The study's own sampler, no proposals."""

    def __init__(self, study: optuna.Study) -> None:
        self._sampler: Any = study.sampler
        self.name = type(study.sampler).__name__

    def sampler(self) -> optuna.samplers.BaseSampler:
        return self._sampler
