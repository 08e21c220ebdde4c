"""Search strategies by name: ``tuner optimize --strategy NAME``.

A strategy (:class:`Strategy`) gives the study its Optuna sampler and may propose the next
configuration itself from a typed view of the study, with a one-line reason (see ``_base``).
"""

from __future__ import annotations

from typing import Any, Callable

from tuner.errors import ConfigError
from tuner.study.strategies._base import Proposal, Strategy

__all__ = ["STRATEGIES", "DEFAULT_STRATEGY", "make_strategy", "Proposal", "Strategy"]

DEFAULT_STRATEGY = "tpe"


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
