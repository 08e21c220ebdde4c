"""Reading a trial's move (:func:`read_move`): the stored one, else its reason's text. This is the
one place that reads a move from the text: trials of studies written before moves were stored
(only ``chosen_by``), so that such a study loads and resumes as it ran.

Every other part of the tuner reads the typed :class:`tuner.study.strategies._moves.Move`. The
texts read here are those the ``guided`` strategy wrote until moves were stored::

    rule: <what the rule says>: <parameter> <old> -> <new>
    repair: rule of trial <n> ran out of memory under load (<failure>): <parameter> <old> -> <new>
    cliff: <parameter> <bracket>
    sweep: <parameter>=<value>[ with patch <patch>, ...]
    model: <expectation>: <parameter>=<value>, ...
    combine: <parameter>=<value> (<gain>), ...

A value is the trial's own (its configuration holds it) when it reads the same, else the text
read as a value (``unset``, ``true``/``false``, a number, a string).
"""

from __future__ import annotations

import re
from typing import Any

from tuner.study.strategies._moves import Change, Move, MoveKind, Signal, Source, value_text

__all__ = ["read_move", "legacy_move"]

_REPAIR = re.compile(r"rule of trial (\d+) ran out of memory under load \((.*)\)$")


def _without_source(text: str) -> str:
    """A rule's reason without the `` (<source>)`` it ends with since sources were named."""
    for source in Source:
        text = text.removesuffix(f" ({source.value})")
    return text


def read_move(
    stored: dict[str, Any] | None, chosen_by: str, config: dict[str, Any]
) -> Move | None:
    """A trial's move: the stored ``move`` attribute, else what its ``chosen_by`` reason text says
    (a study written without a ``move`` attribute); None for a trial no move chose (the sampler's)."""
    if stored:
        return Move.from_dict(stored)
    return legacy_move(chosen_by, config)


def legacy_move(chosen_by: str, config: dict[str, Any]) -> Move | None:
    """The move a stored ``chosen_by`` reason text describes (None: no move chose the trial:
    the baseline, the sampler, a warm start, by hand)."""
    head, _, rest = chosen_by.partition(": ")
    try:
        kind = MoveKind(head)
    except ValueError:
        return None
    if kind in (MoveKind.RULE, MoveKind.REPAIR):
        said, _, step = _without_source(rest).rpartition(": ")
        name, _, values = step.partition(" ")
        was, _, new = values.partition(" -> ")
        change = Change(name, _value(config, name, new), _value({}, name, was))
        if kind is MoveKind.RULE:
            return Move(kind, (change,), detail=said)
        found = _REPAIR.match(said)
        return Move(
            kind,
            (change,),
            trial=int(found[1]) if found else None,
            signal=Signal("failure_reason", found[2], Source.OUTCOME) if found else None,
        )
    if kind is MoveKind.CLIFF:
        name, _, detail = rest.partition(" ")
        return Move(kind, (Change(name, config.get(name)),), detail=detail)
    if kind is MoveKind.SWEEP:
        assigned, _, patches = rest.partition(" with patch ")
        name, _, text = assigned.partition("=")
        return Move(
            kind,
            (Change(name, _value(config, name, text)),),
            patches=tuple(patches.split(", ")) if patches else (),
        )
    detail, _, listed = rest.rpartition(": ") if kind is MoveKind.MODEL else ("", "", rest)
    changes = []
    for item in listed.split(", "):
        name, _, text = item.partition("=")
        text, _, gain = text.partition(" (")
        changes.append(Change(name, _value(config, name, text), gain=_gain(gain)))
    return Move(kind, tuple(changes), detail=detail)


def _value(config: dict[str, Any], name: str, text: str) -> Any:
    if name in config and value_text(config[name]) == text:
        return config[name]
    if text == "unset":
        return None
    if text in ("True", "False"):
        return text == "True"
    for number in (int, float):
        try:
            return number(text)
        except ValueError:
            continue
    return text


def _gain(text: str) -> float | None:
    """``+3%)`` -> 1.03 (the ratio a combination's change measured)."""
    try:
        return 1.0 + float(text.rstrip(")%")) / 100.0
    except ValueError:
        return None
