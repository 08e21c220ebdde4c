"""The memory cliff: an ``up_to_failure`` parameter is best just below where the server runs out
of memory.

While the best's KV pool is full (token usage at least 90% at its top level, from the log or
``/metrics``), the highest value that held and the lowest that failed above it form a bracket
shared by every configuration (:func:`cliff_bracket`); it is bisected, then the best moves to the
highest value that held (``cliff: mem_fraction_static bracket 0.92-0.95``), once for each value
(a best that went below it since measured as fast there). A pool with room to spare gains
nothing from more memory; where nothing reports the pool's use the cliff is probed too
(:meth:`CliffProposer.memory_binds`).

A rule's change that ran out of memory under load (``unstable-at-<c>``) is repaired: tried
again with each ``up_to_failure`` parameter lower, as a larger batch needs more headroom.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tuner.failures import FailureClass
from tuner.study.record import Outcome, StudyView, TrialRecord
from tuner.study.strategies._moves import Change, Move, MoveKind, Signal, Source
from tuner.study.strategies.guided._common import (
    changed,
    grid,
    room_to_spare,
    running_batch,
    token_usage,
)
from tuner.study.strategies.guided._proposer import Candidate, Proposer, Round

__all__ = ["CliffBracket", "cliff_bracket", "CliffProposer", "RepairProposer"]


@dataclass(frozen=True)
class CliffBracket:
    """Where an up-to-failure parameter runs out of memory, as far as the study has seen.

    ``held``: the highest value a trial ran clean with (None: none yet); ``failed``: the lowest
    value above it that ran out of memory (None: none yet); ``inside``: the values of the grid
    above ``held`` and below ``failed`` (a bound not known yet bounds nothing), left to try.
    """

    held: Any
    failed: Any
    inside: list[Any]

    def text(self) -> str:
        """The bracket in words; either end may be unknown (an unset value held no number)."""
        held, failed = self.held, self.failed
        if held is not None and failed is not None:
            return f"bracket {held:g}-{failed:g}"
        if failed is not None:
            return f"below {failed:g}, nothing held yet"
        return (
            f"above {held:g}, no failure yet" if held is not None else "nothing held or failed yet"
        )


def cliff_bracket(
    view: StudyView,
    name: str,
    values: list[Any],
    batch: float | None = None,
    cap: str | None = None,
) -> CliffBracket:
    """The :class:`CliffBracket` of an up-to-failure parameter, shared by every configuration:
    the highest value a trial ran clean with, the lowest value above it that ran out of memory
    (at start or under load), and the ``values`` (its grid) strictly between them (above ``held`` when
    nothing failed). Failures below a value that held are blamed on something else. With
    ``batch`` (the running batch of the configuration it is for), a value held only in trials
    whose server ran at least that many requests at once: memory that held at 64 running
    requests says nothing of 1,024 (``cap``: the running-request cap's parameter, to bound a
    batch no log reported: :func:`running_batch`)."""
    held_values = [
        r.config[name]
        for r in view.records
        if r.outcome in (Outcome.COMPLETE, Outcome.BELOW_BASELINE)
        and r.config.get(name) is not None
        and (batch is None or (ran := running_batch(r, cap)) is None or ran >= 0.9 * batch)
    ]
    held = max(held_values) if held_values else None
    failed_values = [
        r.config[name]
        for r in view.failed()
        if r.config.get(name) is not None
        and r.failure_class is not None
        and r.failure_class.capacity
        and (held is None or r.config[name] > held)
    ]
    failed = min(failed_values) if failed_values else None
    inside = [v for v in values if (held is None or v > held) and (failed is None or v < failed)]
    return CliffBracket(held, failed, inside)


class CliffProposer(Proposer):
    """Bisect each ``up_to_failure`` parameter's bracket from the best, while memory binds."""

    def memory_binds(self, inc: TrialRecord) -> bool:
        """Whether more memory may pay: the best's KV pool is full at its top level, or nothing
        reports its use (a pool with room to spare gains nothing from more memory)."""
        return not room_to_spare(inc)

    def candidates(self, now: Round) -> Iterator[Candidate]:
        inc = now.incumbent
        if not self.memory_binds(inc):
            return
        signal = Signal("token_usage_max", token_usage(inc), Source.SERVER_LOG)
        for name, param in self.plan.space.parameters.items():
            if param.shape != "up_to_failure" or name not in inc.config:
                continue
            current = inc.config[name]
            bracket = cliff_bracket(
                now.view, name, grid(param), running_batch(inc, self.plan.cap), self.plan.cap
            )
            held, failed, inside = bracket.held, bracket.failed, bracket.inside
            span = bracket.text()
            if inside:
                # bisect a bracket; with no failure yet, the highest value the constraints allow
                probes = [inside[len(inside) // 2]] if failed is not None else inside[::-1]
                for probe in probes:
                    yield Candidate(
                        {**inc.config, name: probe},
                        Move(
                            MoveKind.CLIFF,
                            (Change(name, probe, current),),
                            signal=signal,
                            detail=span,
                        ),
                    )
            elif held is not None and current is not None and current < held:
                if any(
                    r.move is not None and r.move.sets(MoveKind.CLIFF, name, held)
                    for r in now.view.records
                ):
                    continue  # moved back up once: the best went below since and measured as fast
                yield Candidate(
                    {**inc.config, name: held},
                    Move(
                        MoveKind.CLIFF,
                        (Change(name, held, current),),
                        signal=signal,
                        detail=f"at {held:g}, the highest that held ({span})",
                    ),
                )


class RepairProposer(Proposer):
    """A rule's change of the best that ran out of memory under load, tried again with each
    ``up_to_failure`` parameter lower (two steps, then four, then eight). A rule that raised
    such a parameter itself is not repaired: that failure places the cliff's bracket."""

    def candidates(self, now: Round) -> Iterator[Candidate]:
        inc, space = now.incumbent, self.plan.space
        capacity = {
            name for name, param in space.parameters.items() if param.shape == "up_to_failure"
        }
        for record in reversed(now.view.failed()):
            reason = record.failure_reason or ""
            move = record.move
            if (
                record.failure_class is not FailureClass.UNSTABLE
                or move is None
                or move.kind is not MoveKind.RULE
            ):
                continue
            if move.parameter in capacity:
                continue  # the rule moved the memory itself: the cliff's bracket has that failure
            different = changed(record.config, inc.config) - capacity
            if not different or len(different) > 2:
                continue  # a probe of the cliff itself, or a change far from the best
            start = {
                **inc.config,
                **{
                    k: v for k, v in record.config.items() if k in different or k not in inc.config
                },
            }
            signal = Signal("failure_reason", reason, Source.OUTCOME)
            for name, param in space.parameters.items():
                current = record.config.get(name)
                if param.shape != "up_to_failure" or current is None:
                    continue
                below = [v for v in grid(param) if v < current]
                for steps in (2, 4, 8):
                    if len(below) >= steps:
                        yield Candidate(
                            {**start, name: below[-steps]},
                            Move(
                                MoveKind.REPAIR,
                                (Change(name, below[-steps], current),),
                                rule=move.rule,
                                signal=signal,
                                trial=record.number,
                            ),
                        )
