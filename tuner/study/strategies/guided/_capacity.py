"""Capacity: what bounds the batch, read from the client's levels, and what the sweep expects of
each parameter.

The engine profile's ``capacity`` section (:class:`tuner.engines.CapacityFlag`) names the flags
that bound the batch (the running-request cap, the memory for the KV pool, batch sizes) with a
prior gain while they bind. With or without an engine log, the trial's own levels say whether a
limit binds (:mod:`tuner.signals`: throughput flat above the cap, requests queueing):

- :class:`tuner.study.strategies.guided._rules.ClientCapBinds` (a rule): the cap binds by the client's levels: raise it to the top
  concurrency (``cap binds at 64: throughput flat from 64 to 1024 (client)``);
- :func:`expected_effect`: the sweep's order when no signal fired: a capacity parameter whose
  limit may bind first (its prior), a value that comes with a source patch next, then the rest;
- :class:`CapacityRetryProposer`: a capacity change that lost alone, while the levels say a
  limit binds, tried again together with the changes that lifted the best since.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tuner.signals import ClientObservation, ClientSignal, client_observations
from tuner.study.record import Outcome, TrialRecord
from tuner.study.strategies._moves import Change, Move, MoveKind, Signal, Source, value_text
from tuner.study.strategies.guided._common import (
    MISSING,
    changed,
    grid,
    pool_full,
    room_to_spare,
    token_usage,
    top_level_observations,
)
from tuner.study.strategies.guided._proposer import Candidate, Plan, Proposer, Round

__all__ = ["cap_value", "limit_binds", "raised_cap", "expected_effect", "CapacityRetryProposer"]

RETRY_RULE = "capacity-retry"


def cap_value(plan: Plan, record: TrialRecord) -> int | None:
    """The running-request cap the trial ran with: its parameter's value, else the one its log
    reported (None: neither says)."""
    value = record.config.get(plan.cap) if plan.cap else None
    if value is None:
        value = top_level_observations(record.observations).get("max_running_requests")
    return None if value is None else int(value)


def limit_binds(plan: Plan, record: TrialRecord) -> ClientObservation | None:
    """What the trial's levels say binds (the cap, or requests queueing), None when nothing."""
    for seen in client_observations(record.levels, cap_value(plan, record)):
        if seen.signal in (ClientSignal.CAP_BINDS, ClientSignal.REQUESTS_QUEUE):
            return seen
    return None


def raised_cap(plan: Plan, name: str, current: Any) -> Any:
    """The cap's value at the workload's top concurrency (its highest when none reaches it)."""
    values = [v for v in grid(plan.space.parameters[name]) if current is None or v > current]
    reach = [v for v in values if v >= plan.top]
    return reach[0] if reach else (values[-1] if values else None)


def expected_effect(plan: Plan, inc: TrialRecord, name: str, patched: bool) -> float:
    """The gain the sweep expects of changing ``name`` from the best: a capacity flag's prior
    while its limit may bind (a cap below the top concurrency or whose levels run flat; memory
    and admission unless the log says the KV pool has room; a pool layout where it says the pool
    is full, no prior where it says nothing), a fifth of it otherwise; ``patch_effect`` for a
    parameter with a value that comes with a source patch; ``default_effect`` for the rest."""
    settings = plan.settings.sweep
    prior = plan.capacity.get(name)
    if prior is None:
        return settings.patch_effect if patched else settings.default_effect
    if prior.kind == "cap":
        value = inc.config.get(name)
        binds = (value is not None and value < plan.top) or limit_binds(plan, inc) is not None
    elif prior.kind in ("memory", "admission"):
        binds = not room_to_spare(inc)  # a pool with room gains nothing from more of it, or fuller
    elif (
        prior.kind == "pool"
    ):  # a layout for more requests: first only where the pool is known full
        if token_usage(inc) is None:
            return (
                settings.patch_effect if patched else settings.default_effect
            )  # no log: no prior
        binds = pool_full(inc)
    else:
        binds = True
    return prior.effect if binds else prior.effect / 5


class CapacityRetryProposer(Proposer):
    """A capacity change that measured below the configuration it changed, tried again from the
    best while the best's levels say a limit binds, when the best has been lifted since by
    other changes (a larger batch that did not pay on the old backend may pay on the new one)."""

    def candidates(self, now: Round) -> Iterator[Candidate]:
        plan, inc = self.plan, now.incumbent
        seen = limit_binds(plan, inc)
        if seen is None or not inc.value:
            return
        measured = [
            r for r in now.view.records if r.outcome in (Outcome.COMPLETE, Outcome.BELOW_BASELINE)
        ]
        for record in reversed(measured):
            move = record.move
            name = (
                move.parameter
                if move is not None and move.kind in (MoveKind.RULE, MoveKind.SWEEP)
                else None
            )
            if name not in plan.capacity or record.config.get(name, MISSING) == inc.config.get(
                name, MISSING
            ):
                continue
            parents = [
                p
                for p in measured
                if p.number < record.number and changed(p.config, record.config) == {name}
            ]
            parent = max(parents, key=lambda p: p.value or 0.0, default=None)
            if (
                parent is None
                or not parent.value
                or _score(record) >= parent.value
                or inc.value <= parent.value
            ):
                continue  # it did not lose alone, or nothing lifted the best since
            lifted = sorted(changed(parent.config, inc.config) - {name})
            if not lifted:
                continue
            value = record.config[name]
            words = ", ".join(f"{n}={value_text(inc.config[n])}" for n in lifted)
            move = Move(
                MoveKind.RULE,
                (Change(name, value, inc.config.get(name)),),
                rule=RETRY_RULE,
                signal=Signal(seen.signal.value, round(seen.ratio, 3), Source.CLIENT),
                trial=record.number,
                detail=f"{seen.says}; lost alone in trial {record.number}, again with {words}",
            )
            yield Candidate({**inc.config, name: value}, move)


def _score(record: TrialRecord) -> float:
    return record.value if record.value is not None else max(record.clean.values(), default=0.0)
