"""The sweep: each parameter's values, one change of the best at a time, each change once.

A change that activates a source patch is tried with the patch applied first (a backend that
only pays with its patch). The order (:meth:`SweepProposer.order`): the most gain expected for
each trial spent, that is the gain expected of a parameter (:func:`._capacity.expected_effect`:
a capacity flag of the engine profile while its limit may bind, ``patch_effect`` for a
parameter with a patched value, ``default_effect`` for the rest) over the trials it takes (its
count of values, at most ``trials_at_most``; one for a patched value, tried first). A shaped
parameter no rule moved is swept too (a cap at the top concurrency and halved, a cliff's
bracket). Then, whatever the order:

- the profile's ``sweep_late`` flags (turning CUDA graphs off, capturing fewer batches: memory
  for speed) go after all the others, unless the best's KV pool is full (then memory is the
  reason to try them, by their expected effect);
- the profile's ``sweep_last`` flags (speculation, an all-to-all backend: a gain at another load
  or on another host) go after those;
- a parameter whose values measured so far all lost at least ``defer_loss`` against the best
  waits for the end (its other values are likely losses too; numbers lie on a curve and keep
  their place), and so does, in the first sweep, a parameter the best's line moved for a
  measured gain of at least ``defer_won`` (the value that won is the likely best of them).

The first sweep does not set a parameter back to a value the best's line left for a measured
gain (the change was measured both ways already). ``again``: a second pass from the best,
counting only the changes measured from this very configuration.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

from tuner.errors import ConfigError
from tuner.study.strategies._moves import Change, Move, MoveKind
from tuner.study.strategies._values import sweep_values
from tuner.study.strategies.guided._capacity import expected_effect, raised_cap
from tuner.study.strategies.guided._cliff import cliff_bracket
from tuner.study.strategies.guided._common import (
    changed,
    doublings,
    grid,
    natural,
    pool_full,
    running_batch,
    top_level_observations,
)
from tuner.study.strategies.guided._proposer import Candidate, Plan, Proposer, Round
from tuner.study.record import TrialRecord

__all__ = ["SweepProposer", "SweptParameter", "sweep_key"]


@dataclass(frozen=True)
class SweptParameter:
    """One parameter's changes in the sweep: whether one comes with a source patch, how many values."""

    name: str
    patched: bool
    count: int
    changes: list[Candidate]


def sweep_key(name: str, value: Any, patches: tuple[str, ...] = ()) -> tuple[Any, ...]:
    """The identity of the sweep's change ``name = value`` (with ``patches`` applied)."""
    return Move(MoveKind.SWEEP, (Change(name, value),), patches=patches).key


class SweepProposer(Proposer):
    """One change of the best at a time (see the module docstring)."""

    def __init__(self, plan: Plan, again: bool = False) -> None:
        super().__init__(plan)
        self.again = again

    def candidates(self, now: Round) -> Iterator[Candidate]:
        plan, inc = self.plan, now.incumbent
        done = {
            r.move.key: r
            for r in now.view.records
            if r.move is not None
            and r.move.kind is MoveKind.SWEEP
            and (not self.again or changed(r.config, inc.config) <= {r.move.parameter})
        }
        swept = []
        for name, param in plan.space.parameters.items():
            if name not in inc.config or (
                param.shape is not None and not self._unread(param, inc)
            ):
                continue
            current = inc.config[name]
            if param.shape is not None:  # a cap or a cliff no rule moved: still explored
                ordered = self._shaped(now, name, param, current)
            else:
                values = [
                    v
                    for v in sweep_values(param, plan.settings.sweep.points)
                    if not (v == current and type(v) is type(current))
                    and not (
                        param.kind == "patch" and not v
                    )  # a patch that came with its backend stays
                ]
                ordered = self._ordered(name, values, current, inc, done)
                if not self.again:
                    left = _left_for_a_gain(now, name, inc)
                    ordered = [
                        v for v in ordered if not any(v == w and type(v) is type(w) for w in left)
                    ]
            changes = [
                Candidate(
                    values_, Move(MoveKind.SWEEP, (Change(name, value, current),), patches=patched)
                )
                for value in ordered
                for values_, patched in self._with_activated(inc.config, name, value)
            ]
            # a value that comes with a source patch first: someone wrote the patch for it
            changes.sort(key=lambda change: not change.move.patches)
            swept.append(
                SweptParameter(
                    name, any(change.move.patches for change in changes), len(ordered), changes
                )
            )
        full = pool_full(inc)
        lost = {item.name for item in swept if self._lost(item.name, done, inc)}
        self.order(swept, inc, full)
        if not full:
            swept.sort(key=lambda item: item.name in plan.late)  # trades made for a reason go last
        swept.sort(
            key=lambda item: item.name in plan.last
        )  # a gain at another load or host: after those
        defer_won = plan.settings.sweep.defer_won
        won = (
            set()
            if self.again or not defer_won
            else {
                item.name
                for item in swept
                if not plan.space.parameters[item.name].numeric_options()
                and _won(now, item.name, inc, defer_won)
            }
        )
        swept.sort(key=lambda item: item.name in lost or item.name in won)
        for item in swept:
            yield from (change for change in item.changes if change.move.key not in done)

    def order(self, swept: list[SweptParameter], inc: TrialRecord, full: bool) -> None:
        """Sort ``swept`` in place, the most expected gain for each trial spent first: a
        parameter with a patched value costs one trial (that value is tried first), any other as
        many as it has values, at most ``trials_at_most`` (a hump's first three). ``full``: the
        best's KV pool is full (then a ``sweep_late`` flag is expected to pay as a patch does)."""
        plan, settings = self.plan, self.plan.settings.sweep
        effect = {
            item.name: settings.patch_effect
            if full and item.name in plan.late
            else expected_effect(plan, inc, item.name, item.patched)
            for item in swept
        }
        swept.sort(
            key=lambda item: (
                -effect[item.name]
                / (1 if item.patched else min(settings.trials_at_most, max(1, item.count))),
                not item.patched,
                0 if item.patched else item.count,
            )
        )

    def _unread(self, param: Any, inc: TrialRecord) -> bool:
        """Whether a shaped parameter is swept: only where no log said what its rules read (the
        batches without CUDA graphs for a cap, the KV pool's use for a cliff): a rule that could
        have fired and did not has already spoken."""
        seen = top_level_observations(inc.observations)
        return (
            "eager_fraction" not in seen
            if param.shape == "saturating"
            else "token_usage_max" not in seen
        )

    def _shaped(self, now: Round, name: str, param: Any, current: Any) -> list[Any]:
        """A shaped parameter's values when no rule moved it: a ``saturating`` cap at the top
        concurrency (when below it), then halved twice (a batch the CUDA graphs cover); an
        ``up_to_failure`` parameter inside its cliff's bracket, then one step below."""
        plan = self.plan
        if param.shape == "saturating":
            up = (
                [raised_cap(plan, name, current)]
                if current is not None and current < plan.top
                else []
            )
            down = [v for v in doublings(param) if plan.top / 4 <= v < plan.top and v != current]
            return [v for v in up if v is not None] + sorted(down, reverse=True)
        held_values = grid(param)
        inside = cliff_bracket(
            now.view, name, held_values, running_batch(now.incumbent, plan.cap), plan.cap
        ).inside
        below = [v for v in held_values if current is not None and v < current][-1:]
        if any(
            r.move is not None
            and r.move.kind is MoveKind.SWEEP
            and r.move.parameter == name
            and r.move.value is not None
            and r.move.changes[0].was is not None
            and r.move.value < r.move.changes[0].was
            for r in now.view.records
        ):
            below = []  # one step below was measured once: not a walk down a flat curve
        return [v for v in inside if current is None or v > current] + below

    def _lost(self, name: str, done: dict[Any, TrialRecord], inc: TrialRecord) -> bool:
        """Whether every value of ``name`` measured in this sweep lost at least ``defer_loss``
        against the best (its other values are likely to lose too: they wait for the end)."""
        settings = self.plan.settings.sweep
        if not settings.defer_loss or not inc.value:
            return False
        if self.plan.space.parameters[name].numeric_options():
            return False  # a number's other values lie on a curve: one loss says little of them
        measured = [
            r.value
            for r in done.values()
            if r.move is not None and r.move.parameter == name and r.value is not None
        ]
        return bool(measured) and all(v < (1 - settings.defer_loss) * inc.value for v in measured)

    def _ordered(
        self,
        name: str,
        values: list[Any],
        current: Any,
        inc: TrialRecord,
        done: dict[Any, TrialRecord],
    ) -> list[Any]:
        """The values to try, in order. Four or more numbers are searched as one hump: both
        ends and the middle first, then only the neighbours of the best measured so far."""
        numbers = sorted(
            {v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}
            | (
                {current}
                if isinstance(current, (int, float)) and not isinstance(current, bool)
                else set()
            )
        )
        if len(numbers) < 4:
            return values
        others = [v for v in values if v not in numbers]
        first = [numbers[0], numbers[-1], numbers[len(numbers) // 2]]
        score = {v: _score(done.get(sweep_key(name, v))) for v in numbers}
        if current in score:
            score[current] = inc.value or 0.0
        untried = [v for v in first if v != current and score[v] is None]
        if untried:
            return untried + others
        best = max(
            (v for v in numbers if score[v] is not None), key=lambda v: cast(float, score[v])
        )
        at = numbers.index(best)
        near = [
            numbers[i] for i in (at - 1, at + 1) if 0 <= i < len(numbers) and numbers[i] != current
        ]
        return [v for v in near if score[v] is None] + others

    def _with_activated(
        self, start: dict[str, Any], name: str, value: Any
    ) -> Iterator[tuple[dict[str, Any], tuple[str, ...]]]:
        """The change, with parameters it activates at their default; source patches it
        activates are tried applied first (then not)."""
        space = self.plan.space
        params = space.parameters
        fill = {n: natural(p) for n, p in params.items()}
        base = {**fill, **start, name: value}
        patches = [
            n for n, p in params.items() if n not in start and n != name and p.kind == "patch"
        ]
        active: Mapping[str, Any]
        try:
            active = space.config({**base, **{n: True for n in patches}}, drop_inactive=True)
        except ConfigError:
            active = {}
        activated = tuple(n for n in patches if n in active)
        if activated:
            yield {**base, **{n: True for n in activated}}, activated
        yield base, ()


def _left_for_a_gain(now: Round, name: str, inc: TrialRecord) -> list[Any]:
    """The values of ``name`` the best's line left for a measured gain: a trial that changed
    ``name`` alone to the best's value measured faster than the trial it changed."""
    current = inc.config.get(name)
    measured = [r for r in now.view.records if r.value is not None]
    left = []
    for record in measured:
        if (
            record.config.get(name) != current
            or record.move is None
            or record.move.parameter != name
        ):
            continue
        for parent in measured:
            if (
                parent.number < record.number
                and changed(parent.config, record.config) == {name}
                and cast(float, record.value) > cast(float, parent.value)
            ):  # measured: both set
                left.append(parent.config[name])
    return left


def _won(now: Round, name: str, inc: TrialRecord, share: float) -> bool:
    """Whether the best's line moved ``name`` to its value for a measured gain of at least ``share``: a trial that changed ``name`` alone to the best's value
    measured that much faster than the trial it changed."""
    current = inc.config.get(name)
    measured = [r for r in now.view.records if r.value]
    for record in measured:
        if (
            record.config.get(name) != current
            or record.move is None
            or record.move.parameter != name
        ):
            continue
        if any(
            parent.number < record.number
            and changed(parent.config, record.config) == {name}
            and cast(float, record.value)
            >= (1 + share) * cast(float, parent.value)  # measured: both set
            for parent in measured
        ):
            return True
    return False


def _score(record: TrialRecord | None) -> float | None:
    """What a sweep trial measured (0 when it failed; None when there is none)."""
    if record is None:
        return None
    return record.value if record.value is not None else max(record.clean.values(), default=0.0)
