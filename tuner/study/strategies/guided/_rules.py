"""Rules: what a person tuning by hand reads in the best trial, and the flag they move one step.

The rules are a table: the engine profile's ``tuning_rules`` (``tuner/engines/<engine>.yaml``,
data: an observation of the server log or ``/metrics`` at least a bound, a flag, a direction, a
line to say), each read by :class:`ProfileRule`, then the built-in rules of
:data:`BUILT_IN_RULES`, each one small :class:`Rule` class. A rule proposes the best's
configuration with one parameter moved (``rule: cap binds at 64 (64 running for 93% of the
level): max_running_requests 64 -> 1024 (metrics)``: the reason ends with where its signal was
read); a change a rule already tried from a best within ``retry_gain`` is not tried again.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tuner.study.record import Outcome, StudyView, TrialRecord
from tuner.study.strategies._moves import Change, Move, MoveKind, Signal, Source
from tuner.study.strategies._values import sweep_values
from tuner.signals import ClientSignal
from tuner.study.strategies.guided._capacity import limit_binds, raised_cap
from tuner.study.strategies.guided._cliff import cliff_bracket
from tuner.study.strategies.guided._common import doublings, grid, top_level_observations
from tuner.study.strategies.guided._proposer import Candidate, Proposer, Round

__all__ = [
    "Rule",
    "Reading",
    "ProfileRule",
    "CapBelowTopConcurrency",
    "ClientCapBinds",
    "BUILT_IN_RULES",
    "RuleProposer",
    "rule_id",
]


@dataclass(frozen=True)
class Reading:
    """What the rules read for one proposal: the best's top-level observations (``seen``), the
    moves made while the best measured was within ``retry_gain`` of it (``fresh``), and where
    each observation was read (``sources``)."""

    seen: dict[str, float]
    fresh: tuple[Move, ...]
    sources: dict[str, Source] = field(default_factory=dict)

    def source(self, name: str) -> Source:
        """Where ``name`` was read (a trial stored before sources were: its server log)."""
        return self.sources.get(name, Source.SERVER_LOG)

    def tried(self, name: str, value: Any) -> bool:
        """Whether a rule already set ``name`` to ``value`` (from a best within ``retry_gain``)."""
        return any(move.sets(MoveKind.RULE, name, value) for move in self.fresh)


class Rule(ABC):
    """One rule: reads the best's observations and moves one parameter (see the module docstring)."""

    id: str = ""

    @abstractmethod
    def candidates(self, rules: RuleProposer, now: Round, reading: Reading) -> Iterator[Candidate]:
        """The changes of ``now.incumbent`` this rule proposes, given what the rules read of it;
        ``rules.steps`` gives a parameter's next values."""


def rule_id(rule: Any) -> str:
    """A profile rule's id: ``<observed> -> <direction> <flag>``."""
    return f"{rule.observed} -> {rule.direction} {rule.change}"


class ProfileRule(Rule):
    """One entry of the engine profile's ``tuning_rules`` (:class:`tuner.engines.TuningRule`)."""

    def __init__(self, rule: Any) -> None:
        self.rule = rule
        self.id = rule_id(rule)

    def candidates(self, rules: RuleProposer, now: Round, reading: Reading) -> Iterator[Candidate]:
        rule, plan, inc, seen = self.rule, rules.plan, now.incumbent, reading.seen
        name = plan.by_flag.get(rule.change)
        if name is None or name not in inc.config or not rule.fires(seen):
            return
        current = inc.config[name]
        saturating = plan.space.parameters[name].shape == "saturating"
        if saturating and rule.direction == "raise" and (current is None or current >= plan.top):
            return  # at or above the top concurrency a cap no longer matters
        signal = Signal(rule.observed, seen.get(rule.observed), reading.source(rule.observed))
        for value in rules.steps(now.view, name, current, rule.direction, seen):
            if not rule.allows(value, seen):
                continue  # still above the captured graphs: the other rule raises them
            if reading.tried(name, value):
                continue  # this change was tried once already (from another best)
            move = Move(
                MoveKind.RULE,
                (Change(name, value, current),),
                rule=self.id,
                signal=signal,
                detail=_says(rule.says, seen, current),
            )
            yield Candidate({**inc.config, name: value}, move)


class CapBelowTopConcurrency(Rule):
    """Built in: with no log line on the cap (``running_req_at_cap_fraction``), a ``saturating``
    parameter below the workload's top concurrency is raised to it (the config says it binds)."""

    id = "saturating-below-top"

    def candidates(self, rules: RuleProposer, now: Round, reading: Reading) -> Iterator[Candidate]:
        if "running_req_at_cap_fraction" in reading.seen:
            return
        plan, inc = rules.plan, now.incumbent
        signal = Signal("top_concurrency", plan.top, Source.SPACE)
        for name, param in plan.space.parameters.items():
            value = inc.config.get(name)
            if param.shape == "saturating" and value is not None and value < plan.top:
                for raised in rules.steps(now.view, name, value, "raise"):
                    move = Move(
                        MoveKind.RULE,
                        (Change(name, raised, value),),
                        rule=self.id,
                        signal=signal,
                        detail=f"cap {value} below the top concurrency {plan.top}",
                    )
                    yield Candidate({**inc.config, name: raised}, move)


class ClientCapBinds(Rule):
    """Built in: the client's levels say the cap binds (throughput flat from the cap's value to
    the top level): the cap is raised to the top concurrency (a rule; see the module docstring)."""

    id = "client-cap-binds"

    def candidates(self, rules: RuleProposer, now: Round, reading: Reading) -> Iterator[Candidate]:
        plan, inc = rules.plan, now.incumbent
        name = plan.cap
        if name is None or name not in inc.config:
            return
        seen = limit_binds(plan, inc)
        if (
            seen is None
            or seen.signal is not ClientSignal.CAP_BINDS
            or seen.cap is None
            or seen.cap >= plan.top
        ):
            return
        current = inc.config[name]
        value = raised_cap(plan, name, current)
        if value is None or reading.tried(name, value):
            return
        move = Move(
            MoveKind.RULE,
            (Change(name, value, current),),
            rule=self.id,
            signal=Signal(seen.signal.value, round(seen.ratio, 3), Source.CLIENT),
            detail=seen.says,
        )
        yield Candidate({**inc.config, name: value}, move)


BUILT_IN_RULES: tuple[Rule, ...] = (
    ClientCapBinds(),
    CapBelowTopConcurrency(),
)  # after the profile's, in this order


class RuleProposer(Proposer):
    """Every rule of the plan's table, in order, on the best's top-level observations."""

    def candidates(self, now: Round) -> Iterator[Candidate]:
        inc = now.incumbent
        reading = Reading(
            top_level_observations(inc.observations),
            fresh_moves(now.view, inc, self.plan.settings.retry_gain),
            top_level_observations(inc.observation_sources),
        )
        for rule in self.plan.rules:
            yield from rule.candidates(self, now, reading)

    def steps(
        self,
        view: StudyView,
        name: str,
        current: Any,
        direction: str,
        seen: dict[str, float] | None = None,
    ) -> list[Any]:
        """The next values of ``name`` from ``current`` in ``direction`` (nearest first)."""
        plan = self.plan
        param = plan.space.parameters[name]
        if direction == "off":
            return [None] if current is not None else []
        if param.shape == "saturating" and direction == "lower":
            # the parameter's doubling nearest half the batch that ran: a cap that binds again
            # below where the trouble was, and the same value from every best (967 and 986
            # running both give 512), which the model pools and the known losses can then skip
            running = (seen or {}).get(
                "running_req_max", current if current is not None else plan.top
            )
            steps = [v for v in doublings(param) if current is None or v < current]
            return (
                [min(steps, key=lambda v: abs(math.log(v / max(1.0, running / 2))))]
                if steps
                else []
            )
        if param.shape == "up_to_failure":
            inside = cliff_bracket(view, name, grid(param)).inside
            return (
                [v for v in inside if current is None or v > current]
                if direction == "raise"
                else []
            )
        numbers = sorted(
            v for v in sweep_values(param, plan.settings.sweep.points) if v is not None
        )
        if param.shape == "saturating" and direction == "raise":
            reach = [v for v in grid(param) if v >= plan.top and (current is None or v > current)]
            return reach[:1] or [v for v in numbers if current is not None and v > current][-1:]
        if current is None:
            return [
                numbers[max(0, len(numbers) // 2 - 1)] if direction == "lower" else numbers[-1]
            ]
        if direction == "raise":
            return [v for v in numbers if v > current][:1]
        return [v for v in numbers if v < current][-1:]


def fresh_moves(view: StudyView, incumbent: TrialRecord, gain: float) -> tuple[Move, ...]:
    """The moves of trials chosen while the best measured was within ``gain`` of the
    incumbent's value (a change tried long before a large gain says little of it now)."""
    fresh: list[Move] = []
    best = 0.0
    now = incumbent.value or 0.0
    for record in view.records:
        if record.move is not None and best * gain >= now:
            fresh.append(record.move)
        if record.outcome == Outcome.COMPLETE and record.value is not None:
            best = max(best, record.value)
    return tuple(fresh)


def _says(template: str, observations: dict[str, float], value: Any) -> str:
    try:
        return template.format(value=value, **observations)
    except (KeyError, ValueError, IndexError):
        return template
