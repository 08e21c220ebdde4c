"""A strategy's move as data: which proposer made it, which rule, what it changed, on what signal.

A proposal of the ``guided`` strategy is a :class:`Move`. It is stored on the trial as the
``move`` attribute (:data:`tuner.study.record.MOVE`, the dict of :meth:`Move.to_dict`) beside
``chosen_by``, the one-line reason rendered from it (:attr:`Move.reason`) that the terminal,
``tuner trials``, the report and optuna-dashboard show. The strategy reads past moves from these
fields, never from the reason's text; a trial of an older study (``chosen_by`` only) is
read once by :func:`tuner.study.strategies._legacy_moves.legacy_move` (both through
:func:`tuner.study.strategies._legacy_moves.read_move`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from tuner.signals import (
    Source,
)  # where a signal was read: one vocabulary with the stored observations

__all__ = ["MoveKind", "Source", "Signal", "Change", "Move", "value_key", "value_text"]


class MoveKind(str, Enum):
    """Which proposer made a move (the stored value is the reason's first word)."""

    RULE = "rule"  # an engine profile rule (or a built-in one) read a signal of the best's trial
    REPAIR = "repair"  # a rule's change that ran out of memory under load, tried with less memory
    CLIFF = "cliff"  # an up_to_failure parameter moved inside the bracket where memory runs out
    SWEEP = "sweep"  # one change of the best (with the source patches it activates)
    MODEL = "model"  # changes the additive model of the trials near the best expects to pay
    COMBINE = "combine"  # the one-changes that measured faster, together


@dataclass(frozen=True)
class Signal:
    """What a move answers: ``name`` (an observation, ``failure_reason``, ``top_concurrency``),
    its ``value`` in the trial it was read from (None: not reported), and its ``source``."""

    name: str
    value: float | str | None
    source: Source


@dataclass(frozen=True)
class Change:
    """One parameter set to ``value``; ``was``: the value it replaces (rules and repairs show
    ``was -> value``); ``gain``: the measured ratio of this change alone (a combination's)."""

    parameter: str
    value: Any
    was: Any = None
    gain: float | None = None


@dataclass(frozen=True)
class Move:
    """A proposal's why, as data (see the module docstring).

    ``rule``: the rule's id (:func:`tuner.study.strategies.guided.rule_id`); ``patches``: the
    source patches a sweep applies with its change; ``trial``: the trial a repair repairs;
    ``detail``: the proposer's own words shown in the reason (a rule's line, a cliff's bracket,
    the model's expectation), never read back; ``carried``: changes the move's own brings with
    it (a raised running cap raises the captured batch with it: the engine profile's
    ``cap_covered_by``), kept apart so the move is still the one change it names.
    """

    kind: MoveKind
    changes: tuple[Change, ...]
    rule: str | None = None
    signal: Signal | None = None
    patches: tuple[str, ...] = ()
    trial: int | None = None
    detail: str = ""
    carried: tuple[Change, ...] = ()

    @property
    def parameter(self) -> str | None:
        """The parameter a one-change move sets (None when it sets several)."""
        return self.changes[0].parameter if len(self.changes) == 1 else None

    @property
    def value(self) -> Any:
        """The value a one-change move sets (None when it sets several)."""
        return self.changes[0].value if len(self.changes) == 1 else None

    @property
    def key(self) -> tuple[Any, ...]:
        """What makes two moves the same change (true kept apart from 1, lists hashable)."""
        return (
            self.kind,
            tuple((c.parameter, value_key(c.value)) for c in self.changes),
            self.patches,
        )

    def sets(self, kind: MoveKind, parameter: str, value: Any) -> bool:
        """Whether this is a ``kind`` move that sets ``parameter`` to ``value``."""
        return (
            self.kind is kind
            and self.parameter == parameter
            and value_key(self.value) == value_key(value)
        )

    @property
    def reason(self) -> str:
        """The one-line reason shown for the trial (its ``chosen_by``)."""
        carried = "".join(
            f"; with {c.parameter} {value_text(c.was)} -> {value_text(c.value)} (covers the batch)"
            for c in self.carried
        )
        return f"{self.kind.value}: {_RENDER[self.kind](self)}{carried}"

    def to_dict(self) -> dict[str, Any]:
        """The JSON-able dict stored on the trial."""
        out: dict[str, Any] = {
            "kind": self.kind.value,
            "changes": [
                {"parameter": c.parameter, "value": c.value, "was": c.was, "gain": c.gain}
                for c in self.changes
            ],
            "rule": self.rule,
            "patches": list(self.patches),
            "trial": self.trial,
            "detail": self.detail,
            "carried": [
                {"parameter": c.parameter, "value": c.value, "was": c.was} for c in self.carried
            ],
            "signal": None
            if self.signal is None
            else {
                "name": self.signal.name,
                "value": self.signal.value,
                "source": self.signal.source.value,
            },
        }
        return json.loads(json.dumps(out, default=str))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Move:
        """The move :meth:`to_dict` stored."""
        signal = data.get("signal")
        return cls(
            kind=MoveKind(data["kind"]),
            changes=tuple(
                Change(c["parameter"], c.get("value"), c.get("was"), c.get("gain"))
                for c in data.get("changes") or []
            ),
            rule=data.get("rule"),
            signal=None
            if not signal
            else Signal(signal["name"], signal.get("value"), Source(signal["source"])),
            patches=tuple(data.get("patches") or ()),
            trial=data.get("trial"),
            detail=str(data.get("detail") or ""),
            carried=tuple(
                Change(c["parameter"], c.get("value"), c.get("was"))
                for c in data.get("carried") or []
            ),
        )


def value_text(value: Any) -> str:
    """A value as a reason shows it (``unset``, ``0.92``, ``1024``, ``fp8_e4m3``)."""
    return "unset" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def value_key(value: Any) -> Any:
    """A hashable identity of a parameter value: true is not 1, a list is a tuple."""
    if isinstance(value, list):
        return ("list", tuple(value_key(v) for v in value))
    return (
        type(value).__name__ if isinstance(value, (bool, str)) or value is None else "number",
        value,
    )


def _one_step(move: Move) -> str:
    change = move.changes[0]
    return f"{change.parameter} {value_text(change.was)} -> {value_text(change.value)}"


def _listed(move: Move) -> str:
    return ", ".join(f"{c.parameter}={value_text(c.value)}" for c in move.changes)


_RENDER = {
    MoveKind.RULE: lambda m: (
        f"{m.detail}: {_one_step(m)}" + (f" ({m.signal.source.value})" if m.signal else "")
    ),
    MoveKind.REPAIR: lambda m: (
        f"rule of trial {m.trial} ran out of memory under load "
        f"({m.signal.value if m.signal else ''}): {_one_step(m)}"
    ),
    MoveKind.CLIFF: lambda m: f"{m.parameter} {m.detail}",
    MoveKind.SWEEP: lambda m: (
        _listed(m) + (f" with patch {', '.join(m.patches)}" if m.patches else "")
    ),
    MoveKind.MODEL: lambda m: f"{m.detail}: {_listed(m)}",
    MoveKind.COMBINE: lambda m: ", ".join(
        f"{c.parameter}={value_text(c.value)} ({(c.gain or 1.0) - 1:+.0%})" for c in m.changes
    ),
}
