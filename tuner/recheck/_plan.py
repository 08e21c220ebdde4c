"""What a recheck measures, and in which order.

The study's baseline, the winner ``tuner export`` writes (:attr:`StudyView.best_stable`) and
the next ``top - 1`` distinct stable configurations by the study's ranking
(:meth:`TrialRecord.rank`): each a :class:`Subject`. They run in rounds, each round every subject
once, baseline first (a fresh server start each): a drift of the host during the recheck
(a GPU warming, another job) then touches every configuration alike instead of one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from tuner.errors import ConfigError
from tuner.study.record import StudyView, TrialRecord, stable_candidates

__all__ = ["Role", "Subject", "choose_subjects", "interleaved"]


class Role(Enum):
    """A subject's place in the study: the baseline, the exported winner, or one of the next."""

    BASELINE = "baseline"
    WINNER = "winner"
    NEXT = "next"


@dataclass(frozen=True)
class Subject:
    """One configuration of the study to measure again: its ``role`` and its stored record
    (``place``: 1 for the winner, 2 for the runner-up, ...; 0 for the baseline)."""

    role: Role
    record: TrialRecord
    place: int

    @property
    def label(self) -> str:
        if self.role == Role.BASELINE:
            return f"baseline (trial {self.record.number})"
        if self.role == Role.WINNER:
            return f"winner (trial {self.record.number})"
        return f"#{self.place} (trial {self.record.number})"


def choose_subjects(view: StudyView, top: int) -> list[Subject]:
    """The baseline, the winner and the next ``top - 1`` distinct stable configurations.

    Raises:
        ConfigError: the study has no baseline or no stable trial (nothing to recheck).
    """
    baseline = view.baseline_trial
    winner = view.best_stable
    if baseline is None or winner is None:
        raise ConfigError(
            f"study {view.name!r} has no {'baseline' if baseline is None else 'stable trial'} to recheck; "
            "fix: recheck a study `tuner optimize` has run (tuner trials lists it)"
        )
    subjects = [Subject(Role.BASELINE, baseline, 0)]
    seen = {_key(baseline)}
    if _key(winner) not in seen:
        subjects.append(Subject(Role.WINNER, winner, 1))
        seen.add(_key(winner))
    noise = view.noise.relative
    ranked = sorted(
        stable_candidates(list(view.records)), key=lambda r: r.rank(noise), reverse=True
    )
    for record in ranked:
        if len(subjects) >= top + 1:
            break
        if record.reused_from is not None or _key(record) in seen:
            continue
        seen.add(_key(record))
        subjects.append(Subject(Role.NEXT, record, len(subjects)))
    return subjects


def _key(record: TrialRecord) -> str:
    return record.config_key or repr(sorted(record.config.items()))


def interleaved(subjects: list[Subject], runs: int) -> list[tuple[int, Subject]]:
    """(round, subject) in the order they run: round 0 every subject in turn, then round 1, ..."""
    if runs < 1:
        raise ConfigError(f"--runs {runs}: at least one run of each; fix: --runs 2 or more")
    return [(round_, subject) for round_ in range(runs) for subject in subjects]
