"""The strategy plug point: what a search strategy is and what it returns.

Each iteration of the optimize loop reads the study once (:func:`tuner.study.record.read_view`) and
asks the strategy for a :class:`Proposal`. A proposal is run next (queued through
``study.enqueue_trial``) and its reason is stored as the trial's ``chosen_by``, its move (when it
has one) as the trial's ``move``; ``None`` lets the strategy's Optuna sampler draw the next
configuration (``chosen_by = "sampler: <name>"``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import optuna

from tuner.study.strategies._moves import Move
from tuner.study.record import StudyView

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = ["Proposal", "Strategy", "SpaceStrategy"]


@dataclass(frozen=True)
class Proposal:
    """A configuration to run next (parameter name -> value, None = unset) and why, in one line
    (``rule: cap binds at 64 (#running-req = 64 for 93% of the level): ...``); ``move``: that why
    as data, when the strategy made a :class:`Move` (its ``reason`` is then ``move.reason``)."""

    config: dict[str, Any]
    reason: str
    move: Move | None = None

    @classmethod
    def of(cls, config: dict[str, Any], move: Move) -> Proposal:
        """The proposal of ``move``, its reason rendered from it."""
        return cls(config, move.reason, move)


class Strategy(ABC):
    """A search strategy: an Optuna sampler, plus proposals made from the study view."""

    name: str = ""

    @abstractmethod
    def sampler(self) -> optuna.samplers.BaseSampler:
        """What the study samples with when no proposal is made (made once per run)."""

    def propose(self, view: StudyView) -> Proposal | None:
        """The configuration to run next with its reason, or None to let the sampler draw."""
        return None

    @property
    def sampled_reason(self) -> str:
        """The ``chosen_by`` of a configuration the sampler drew."""
        return f"sampler: {self.name}"


class SpaceStrategy(Strategy):
    """A strategy that :func:`tuner.study.strategies.make_strategy` makes from the search space
    and the seed (``random``, ``tpe``, ``one-at-a-time``, ``guided``)."""

    def __init__(self, space: SearchSpace, seed: int | None) -> None:
        self.space = space
        self.seed = seed
