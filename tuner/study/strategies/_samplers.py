"""Strategies that are an Optuna sampler alone: ``--sampler gp`` (and the others Optuna offers),
and the study's own sampler when the optimize loop is called without a strategy."""

from __future__ import annotations

from typing import Any

import optuna

from tuner.study.strategies._base import Strategy
from tuner.errors import ConfigError
from tuner.study.strategies._optional_deps import require_sampler
from tuner.study.strategies.tpe import tpe_settings

__all__ = ["SAMPLERS", "SamplerStrategy", "StudySampler", "make_sampler"]

SAMPLERS = ("tpe", "random", "gp", "cmaes", "qmc", "nsga2", "bruteforce")


def make_sampler(name: str, seed: int | None) -> optuna.samplers.BaseSampler:
    """One of the samplers Optuna offers, by short name (``tpe`` by default)."""
    samplers = optuna.samplers
    factories = {
        "tpe": lambda: samplers.TPESampler(**tpe_settings(seed)),
        "random": lambda: samplers.RandomSampler(seed=seed),
        "gp": lambda: samplers.GPSampler(seed=seed),
        "cmaes": lambda: samplers.CmaEsSampler(seed=seed),
        "qmc": lambda: samplers.QMCSampler(seed=seed),
        "nsga2": lambda: samplers.NSGAIISampler(seed=seed),
        "bruteforce": lambda: samplers.BruteForceSampler(seed=seed),
    }
    if name not in factories:
        raise ConfigError(f"--sampler {name}: unknown; fix: use one of {', '.join(SAMPLERS)}")
    require_sampler(name)  # torch for gp, cmaes for cmaes: before any host time
    return factories[name]()


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
