"""Search strategies by name: ``tuner optimize --strategy NAME``.

A strategy (:class:`tuner.study.strategies._base.Strategy`) gives the study its Optuna sampler
and may propose the next configuration itself from a typed view of the study, with a one-line
reason and, for ``guided``, that reason as data (:class:`Move`, stored on the trial). The sampler
factory (:func:`make_sampler`, ``--sampler NAME``) lives here too. This module stays light (no
Optuna import): the command line reads the names from it; the names that need Optuna
(:data:`_LAZY`) are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from tuner.errors import ConfigError
from tuner.study.strategies._moves import Change, Move, MoveKind, Signal, Source, read_move

if TYPE_CHECKING:
    from tuner.study.strategies._base import Proposal, SpaceStrategy, Strategy
    from tuner.study.strategies._samplers import SAMPLERS, SamplerStrategy, StudySampler, make_sampler

__all__ = [
    "STRATEGIES", "DEFAULT_STRATEGY", "make_strategy", "resolve_strategy",
    "Move", "MoveKind", "Change", "Signal", "Source", "read_move",
    "Strategy", "SpaceStrategy", "Proposal",
    "SAMPLERS", "make_sampler", "SamplerStrategy", "StudySampler",
]

# Public names whose modules import Optuna: loaded when first asked for (PEP 562).
_LAZY = {
    "Strategy": "_base", "SpaceStrategy": "_base", "Proposal": "_base",
    "SAMPLERS": "_samplers", "make_sampler": "_samplers", "SamplerStrategy": "_samplers",
    "StudySampler": "_samplers",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)

DEFAULT_STRATEGY = "guided"  # beats TPE-as-today on the emulator's model and on held-out generated landscapes (docs/search-efficiency.md)


def _tpe(space: Any, seed: int | None) -> Strategy:
    from tuner.study.strategies.tpe import TpeStrategy

    return TpeStrategy(space, seed)


def _random(space: Any, seed: int | None) -> Strategy:
    from tuner.study.strategies.random_search import RandomStrategy

    return RandomStrategy(space, seed)


def _one_at_a_time(space: Any, seed: int | None) -> Strategy:
    from tuner.study.strategies.one_at_a_time import OneAtATimeStrategy

    return OneAtATimeStrategy(space, seed)


def _guided(space: Any, seed: int | None) -> Strategy:
    from tuner.study.strategies.guided import GuidedStrategy

    return GuidedStrategy(space, seed)


_FACTORIES: dict[str, Callable[[Any, int | None], Strategy]] = {
    "guided": _guided,
    "tpe": _tpe,
    "random": _random,
    "one-at-a-time": _one_at_a_time,
}
STRATEGIES = tuple(_FACTORIES)


def make_strategy(name: str, space: Any, seed: int | None) -> Strategy:
    """The strategy called ``name``; an unknown name is a one-line ConfigError listing them."""
    if name not in _FACTORIES:
        raise ConfigError(f"--strategy {name}: unknown; fix: use one of {', '.join(STRATEGIES)}")
    return _FACTORIES[name](space, seed)


def resolve_strategy(strategy: str | None, sampler: str | None, space: Any, seed: int | None) -> Strategy:
    """The strategy of ``--strategy``, or of the older ``--sampler`` (a strategy of the same
    name, else that Optuna sampler alone); neither: :data:`DEFAULT_STRATEGY`."""
    if strategy is not None and sampler is not None:
        raise ConfigError(f"--sampler {sampler} with --strategy {strategy}: give one; fix: drop --sampler")
    if strategy is None and sampler is not None:
        if sampler in _FACTORIES:
            return make_strategy(sampler, space, seed)
        from tuner.study.strategies._samplers import SamplerStrategy

        return SamplerStrategy(sampler, seed)
    return make_strategy(strategy or DEFAULT_STRATEGY, space, seed)
