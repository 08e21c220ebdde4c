"""A winner beyond noise: the study's run-to-run noise, the close pair of the best and the
runner-up, and the winner's lines (with a tie when there is one).

The re-measures of the close pair run in the optimize loop (:mod:`tuner.study.loop._confirm`);
what they measured is read here (each trial's :class:`Spread`).

**Noise.** The spread the pair is compared with: :mod:`tuner.study.record._noise`.

**Close.** The pair is re-measured while the best's lead is within two standard errors of
the difference of the means (not one: at one run each and 2.2% noise, a lead under 6.2%).
A best that leads clearly is still run a second time (:data:`WINNER_RUNS`): what is exported is
the mean of its runs with a spread it measured, never one run's figure.

**Ranking.** Trials rank by their mean less one standard error of it
(:meth:`TrialRecord.rank`): once the pair is re-measured, a trial measured once does not
outrank it on a single lucky run.
"""

from __future__ import annotations

from dataclasses import dataclass

import optuna

from tuner.study.record._noise import Noise
from tuner.study.record._record import TrialRecord
from tuner.study.record._results import stable_candidates
from tuner.study.record._view import read_view
from tuner.study.record._spread import lead_is_clear, tied

__all__ = [
    "CONFIRM_RUNS",
    "WINNER_RUNS",
    "Remeasure",
    "changed_settings",
    "close_pair",
    "remeasures_wanted",
    "study_noise",
    "winner_lines",
]

CONFIRM_RUNS = 3  # runs of each of a close pair before the winner is told (the loop re-measures)
WINNER_RUNS = 2  # runs of a best that leads clearly: its exported figure is a mean with a spread


@dataclass(frozen=True)
class Remeasure:
    """A trial the study wants measured again: its runs so far (re-runs that failed count: a
    configuration is not re-run without end) and the runs it is wanted at."""

    record: TrialRecord
    runs: int
    wanted: int
    pair: tuple[int, int] | None  # the close pair's trial numbers (None: the best leads clearly)

    @property
    def left(self) -> int:
        return max(0, self.wanted - self.runs)


def study_noise(study: optuna.Study) -> Noise:
    """See the module docstring, **Noise** (the study's view's :attr:`StudyView.noise`)."""
    return read_view(study).noise


def close_pair(found: list[TrialRecord], noise: float) -> tuple[TrialRecord, TrialRecord] | None:
    """The best and the runner-up stable trials when the best's lead is within two standard
    errors of the difference of their means (:func:`tuner.study.record._spread.lead_is_clear`)."""
    ranked = _ranked(found, noise)
    if len(ranked) < 2:
        return None
    best, second = ranked[0].spread(noise), ranked[1].spread(noise)
    if best is None or second is None or lead_is_clear(best, second):
        return None
    return ranked[0], ranked[1]


def remeasures_wanted(
    found: list[TrialRecord], noise: float, *, last: bool = False
) -> list[Remeasure]:
    """The trials to run again before the study's winner is told, each with runs left: the close
    pair (:func:`close_pair`) each to :data:`CONFIRM_RUNS`, else the best to :data:`WINNER_RUNS`.
    For the ``last`` trial of a budget, when the pair or the best has its runs, the best once
    more: a configuration searched last that came out best could not be re-measured, so that
    trial goes to the winner. Empty when there is no stable trial or each has its runs."""
    pair = close_pair(found, noise)
    numbers = None if pair is None else (pair[0].number, pair[1].number)
    best = pair[0] if pair is not None else next(iter(_ranked(found, noise)), None)
    if pair is not None:
        wanted = [(record, CONFIRM_RUNS) for record in pair]
    else:
        wanted = [(best, WINNER_RUNS)] if best is not None else []
    out = [
        Remeasure(record, runs, runs_wanted, numbers)
        for record, runs_wanted in wanted
        if (runs := _runs(record, noise)) < runs_wanted
    ]
    if last and not out and best is not None:  # the last trial: the best once more (see above)
        runs = _runs(best, noise)
        out = [Remeasure(best, runs, runs + 1, numbers)]
    return out


def _ranked(found: list[TrialRecord], noise: float) -> list[TrialRecord]:
    """The stable trials, best first by :meth:`TrialRecord.rank` at ``noise``."""
    return sorted(stable_candidates(found), key=lambda r: r.rank(noise), reverse=True)


def _runs(record: TrialRecord, noise: float) -> int:
    """Its runs so far, re-runs that failed counted (a configuration is not re-run without end)."""
    spread = record.spread(noise)
    return spread.runs + spread.failed if spread is not None else 1


def winner_lines(study: optuna.Study, unit: str = "tok/s") -> list[str]:
    """The best stable trial with its spread, and a tie with the runner-up when there is one."""
    view = read_view(study)  # read once: the noise and the ranking of the same trials
    noise = view.noise
    ranked = _ranked(list(view.records), noise.relative)
    if not ranked:
        return []
    first = ranked[0].spread(noise.relative)
    assert first is not None  # a stable trial has a value
    lines = [f"winner: trial {ranked[0].number}: {first.text(unit)}"]
    if len(ranked) > 1:
        second = ranked[1].spread(noise.relative)
        assert second is not None
        if tied(first, second):
            lines.append(
                f"tied: trial {ranked[0].number} ({first.text(unit)}) and trial {ranked[1].number} "
                f"({second.text(unit)}) are within each other's spread (noise {noise.relative:.1%}: "
                f"{noise.source}); either may be exported"
                + _simpler(ranked[0], ranked[1], view.baseline_trial)
            )
    return lines


def changed_settings(record: TrialRecord, baseline: TrialRecord) -> int:
    """How many settings (flags, source patches, environment) ``record`` sets otherwise than the
    baseline: what a launch script carries beyond today's, to keep and to maintain."""
    names = record.config.keys() | baseline.config.keys()
    return sum(record.config.get(name) != baseline.config.get(name) for name in names)


def _simpler(winner: TrialRecord, other: TrialRecord, baseline: TrialRecord | None) -> str:
    """Of a tied pair, the one that changes fewer settings from the baseline (a person picks it:
    the same speed for less to maintain); empty when they change as many, or without a baseline."""
    if baseline is None or not baseline.config:
        return ""
    mine, theirs = changed_settings(winner, baseline), changed_settings(other, baseline)
    if mine == theirs:
        return ""
    if mine < theirs:
        return (
            f"; trial {winner.number} is also the simpler ({_settings(mine)} changed from the "
            f"baseline against {theirs})"
        )
    return (
        f"; trial {other.number} is the simpler ({_settings(theirs)} changed from the baseline "
        f"against {mine}): `tuner export --trial {other.number}`"
    )


def _settings(count: int) -> str:
    return f"{count} setting" if count == 1 else f"{count} settings"
