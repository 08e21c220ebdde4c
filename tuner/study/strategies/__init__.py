"""Search strategies by name: ``tuner optimize --strategy NAME``.

A strategy (:class:`tuner.study.strategies._base.Strategy`) gives the study its Optuna sampler
and may propose the next configuration itself from a typed view of the study, with a one-line
reason and, for ``guided``, that reason as data (:class:`Move`, stored on the trial). The sampler
factory (:func:`make_sampler`, ``--sampler NAME``) lives here too. This module stays light (no
Optuna import): the command line reads the names from it; the names that need Optuna
(:data:`_LAZY`) are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.errors import ConfigError
from tuner.study.strategies._legacy_moves import read_move
from tuner.study.strategies._moves import Change, Move, MoveKind, Signal, Source

if TYPE_CHECKING:
    from tuner.space import SearchSpace
    from tuner.study.strategies._base import Proposal, SpaceStrategy, Strategy
    from tuner.study.strategies._samplers import (
        SAMPLERS,
        SamplerStrategy,
        StudySampler,
        make_sampler,
    )

__all__ = [
    "STRATEGIES",
    "DEFAULT_STRATEGY",
    "make_strategy",
    "resolve_strategy",
    "Move",
    "MoveKind",
    "Change",
    "Signal",
    "Source",
    "read_move",
    "Strategy",
    "SpaceStrategy",
    "Proposal",
    "SAMPLERS",
    "make_sampler",
    "SamplerStrategy",
    "StudySampler",
]

# Public names whose modules import Optuna: loaded when first asked for (PEP 562).
_LAZY = {
    "Strategy": "_base",
    "SpaceStrategy": "_base",
    "Proposal": "_base",
    "SAMPLERS": "_samplers",
    "make_sampler": "_samplers",
    "SamplerStrategy": "_samplers",
    "StudySampler": "_samplers",
}

DEFAULT_STRATEGY = "guided"  # beats TPE-as-today on the emulator's model and on held-out generated landscapes (docs/search-efficiency.md)

# Each strategy by name: the module of this package and the class (a SpaceStrategy) that make it,
# imported when first made.
_STRATEGY_CLASSES = {
    "guided": ("guided", "GuidedStrategy"),
    "tpe": ("tpe", "TpeStrategy"),
    "random": ("random_search", "RandomStrategy"),
    "one-at-a-time": ("one_at_a_time", "OneAtATimeStrategy"),
}
STRATEGIES = tuple(_STRATEGY_CLASSES)


def _load(module: str, name: str) -> Any:
    """``name`` of this package's ``module``, imported on first use."""
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return _load(_LAZY[name], name)


def make_strategy(name: str, space: SearchSpace, seed: int | None) -> Strategy:
    """The strategy called ``name``; an unknown name is a one-line ConfigError listing them."""
    if name not in _STRATEGY_CLASSES:
        raise ConfigError(f"--strategy {name}: unknown; fix: use one of {', '.join(STRATEGIES)}")
    strategy: Strategy = _load(*_STRATEGY_CLASSES[name])(space, seed)
    return strategy


def resolve_strategy(
    strategy: str | None, sampler: str | None, space: SearchSpace, seed: int | None
) -> Strategy:
    """The strategy of ``--strategy``, or of the older ``--sampler`` (a strategy of the same
    name, else that Optuna sampler alone); neither: :data:`DEFAULT_STRATEGY`."""
    if strategy is not None and sampler is not None:
        raise ConfigError(
            f"--sampler {sampler} with --strategy {strategy}: give one; fix: drop --sampler"
        )
    if strategy is None and sampler is not None:
        if sampler in _STRATEGY_CLASSES:
            return make_strategy(sampler, space, seed)
        from tuner.study.strategies._samplers import SamplerStrategy

        return SamplerStrategy(sampler, seed)
    return make_strategy(strategy or DEFAULT_STRATEGY, space, seed)
