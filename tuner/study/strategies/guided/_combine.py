"""Combinations: the best's configuration with every one-change of the sweep that measured faster
than the configuration it changed (small gains hidden by noise add up), the largest first
(``combine: chunked_prefill_size=4096 (+3%), radix_cache=False (+2%)``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tuner.study.record import Outcome, StudyView, TrialRecord
from tuner.study.strategies._moves import Change, Move, MoveKind
from tuner.study.strategies.guided._common import MISSING, changed, hashable
from tuner.study.strategies.guided._proposer import Candidate, Proposer, Round

__all__ = ["CombineProposer", "one_change_gains"]


class CombineProposer(Proposer):
    """Every one-change that paid, together; then the two that paid most (see the module docstring)."""

    def candidates(self, now: Round) -> Iterator[Candidate]:
        inc = now.incumbent
        picked: dict[str, tuple[float, TrialRecord]] = {}
        for (name, _), (gain, record) in one_change_gains(now.view).items():
            if gain > 1.0 and record.config.get(name, MISSING) != inc.config.get(name, MISSING):
                if name not in picked or gain > picked[name][0]:
                    picked[name] = (gain, record)
        ordered = sorted(picked.items(), key=lambda item: -item[1][0])
        for size in sorted({len(ordered), min(2, len(ordered))}, reverse=True):
            if size < 1:
                continue
            values = dict(inc.config)
            for name, (_, record) in ordered[:size]:
                values[name] = record.config[name]
                values.update({k: v for k, v in record.config.items() if k not in inc.config})
            changes = tuple(
                Change(name, record.config[name], inc.config.get(name), gain=gain)
                for name, (gain, record) in ordered[:size]
            )
            yield Candidate(values, Move(MoveKind.COMBINE, changes))


def one_change_gains(view: StudyView) -> dict[tuple[str, Any], tuple[float, TrialRecord]]:
    """For each sweep trial: its measured value over that of the best earlier configuration it
    changed in its one parameter only (the configuration it was measured against)."""
    gains: dict[tuple[str, Any], tuple[float, TrialRecord]] = {}
    earlier: list[TrialRecord] = []
    for record in view.records:
        if record.outcome == Outcome.COMPLETE and record.value is not None:
            if (
                record.move is not None
                and record.move.kind is MoveKind.SWEEP
                and record.move.parameter is not None
            ):
                name = record.move.parameter
                parents = [
                    p.value
                    for p in earlier
                    if p.value is not None
                    and changed(p.config, record.config) <= {name}
                    and p.config.get(name, MISSING) != record.config.get(name)
                ]
                if parents:
                    gains[(name, hashable(record.config.get(name)))] = (
                        record.value / max(parents),
                        record,
                    )
            earlier.append(record)
    return gains
