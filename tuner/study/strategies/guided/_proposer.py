"""The plug point of the ``guided`` strategy's proposers, and the records they read.

A proposer (rules, repairs, the memory cliff, the sweep, the additive model, combinations) reads
the :class:`Plan` (what is known before any trial: the space, the settings, the engine profile's
data) and one :class:`Round` (the study at this proposal: the view, the best, the model fitted
near it) and yields :class:`Candidate` configurations, best first, each with its typed move.
The coordinator (:class:`tuner.study.strategies.guided.GuidedStrategy`) runs the first one
that passes its checks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tuner.study.strategies._moves import Move
from tuner.study.strategies.additive import AdditiveFit
from tuner.study.strategies.guided._settings import GuidedSettings
from tuner.study.record import StudyView, TrialRecord

if TYPE_CHECKING:
    from tuner.space import SearchSpace


__all__ = ["Candidate", "Plan", "Round", "Proposer"]


@dataclass(frozen=True)
class Candidate:
    """A configuration to try (before the space drops inactive parameters) and its move."""

    values: dict[str, Any]
    move: Move


@dataclass(frozen=True)
class Plan:
    """What the strategy knows before any trial.

    ``rules``: the rules, in order (the engine profile's ``tuning_rules``, then the built-in
    ones); ``by_flag``: flag -> parameter; ``late``: the parameters of the profile's
    ``sweep_late``; ``in_use``: parameter -> the observation that says which value the server
    used while it was unset; ``top``: the workload's top concurrency; ``capacity``: parameter ->
    the profile's :class:`tuner.engines.CapacityFlag` of its flag (what bounds the batch); ``cap``:
    the parameter of the profile's running-request cap (None: the space does not search it);
    ``last``: the parameters of the profile's ``sweep_last`` (their gain lies at another load or
    on another host); ``covers``: those of its ``cap_covered_by`` (raised with the cap).
    """

    space: SearchSpace
    seed: int | None
    settings: GuidedSettings
    rules: tuple[Any, ...]  # guided._rules.Rule (which reads Plan: no import back)
    by_flag: dict[str, str]
    late: frozenset[str]
    in_use: dict[str, str]
    top: int
    capacity: dict[str, Any] = field(default_factory=dict)
    cap: str | None = None
    last: frozenset[str] = frozenset()  # the parameters of the profile's ``sweep_last``
    covers: tuple[str, ...] = ()  # the parameters of the profile's ``cap_covered_by``


@dataclass(frozen=True)
class Round:
    """The study at one proposal: the view, the best the proposals start from (``incumbent``)
    and the additive model fitted near it (None: too few trials)."""

    view: StudyView
    incumbent: TrialRecord
    fit: AdditiveFit | None = field(default=None, compare=False)


class Proposer(ABC):
    """One way of proposing the next configurations (see the module docstring)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan

    @abstractmethod
    def candidates(self, now: Round) -> Iterator[Candidate]:
        """The configurations this proposer would try next, best first."""
