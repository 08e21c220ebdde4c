"""One trial as every reader sees it: :class:`TrialRecord`, read from Optuna's record once.

The optimize loop, the strategies, the report, ``tuner trials``, ``tuner best`` and ``tuner
export`` all read this one record; :func:`read_record` is the one place that turns a trial's
stored attributes into its fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from tuner.failures import FailureClass
from tuner.signals import Source
from tuner.study.record._figure import figures_by_level, trial_figure
from tuner.study.record._keys import (
    CHOSEN_BY,
    COMMAND_LINE,
    CONFIG,
    CONFIG_KEY,
    FAILURE_DETAIL,
    FAILURE_REASON,
    IS_BASELINE,
    LEVELS,
    MOVE,
    OBSERVATIONS,
    PRUNED_REASON,
    REPEATS,
    REUSED_FROM,
    STABLE,
    VALIDATION,
)
from tuner.study.record._level import Level, clean_levels, read_levels
from tuner.study.record._outcome import Outcome, outcome_of
from tuner.study.record._spread import RunFigure, Spread, rank_of, spread_of
from tuner.study.record._write import observation_sources
from tuner.study.strategies._legacy_moves import read_move
from tuner.study.strategies._moves import Move

__all__ = ["TrialRecord", "read_record"]


@dataclass(frozen=True)
class TrialRecord:
    """One trial: its state and configuration, what became of it, its levels and figures.

    ``outcome``: what became of it (a copy of an earlier identical trial is REUSED; ``result``
    tells what it copied); ``levels``: every level it measured, typed (:class:`Level`);
    ``clean``: concurrency -> the objective's figure of its clean levels only (what the search
    compares); ``reported``: the figures it reported to Optuna, by step (its clean levels as the
    loop reported them); ``observations``: what the server log, ``/metrics`` and GPU telemetry
    said (``kv_tokens``, ``running_req_at_cap_fraction``, ``queue_growing``, ...), names as in
    :mod:`tuner.signals`, with where each was read in ``observation_sources``; ``chosen_by``: the
    one-line reason it was run; ``move``: the strategy's move that chose it, as data (None: the
    baseline, the sampler, by hand); ``stable``: COMPLETE with every level clean;
    ``user_attrs``: everything stored on it (and the study's soak result and re-measures of it),
    read through the named keys of :mod:`tuner.study.record`.
    """

    number: int
    state: TrialState
    config: dict[str, Any]
    outcome: Outcome
    value: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    is_baseline: bool = False
    reused_from: int | None = None
    config_key: str | None = None
    chosen_by: str = ""
    move: Move | None = None
    stable: bool = False
    failure_reason: str | None = None
    pruned_reason: str | None = None
    detail: str | None = None
    command_line: str | None = None
    levels: tuple[Level, ...] = ()
    clean: dict[int, float] = field(default_factory=dict)
    reported: dict[int, float] = field(default_factory=dict)
    observations: dict[str, float] = field(default_factory=dict)
    observation_sources: dict[str, Source] = field(
        default_factory=dict
    )  # name -> where it was read
    copied_outcome: Outcome | None = None  # a copy (REUSED): the outcome of the trial it copied
    user_attrs: dict[str, Any] = field(default_factory=dict)
    metric: str = (
        "output_throughput"  # the objective's level figure, for the runs' like-for-like spread
    )
    max_failed_fraction: float = 0.01

    @property
    def bound_levels(self) -> tuple[int, ...]:
        """The levels whose figure is a lower bound: the client under-drove the server there."""
        return trial_figure(self.levels, self.metric, self.max_failed_fraction).bound_levels

    @property
    def ran(self) -> bool:
        """Whether this trial ran its configuration on the host (COMPLETE, below the baseline,
        or FAIL by its configuration)."""
        return self.outcome.ran

    @property
    def result(self) -> Outcome:
        """The outcome of its result: its own, or for a copy the one it copied."""
        return self.copied_outcome or self.outcome

    @property
    def failure_class(self) -> FailureClass | None:
        """The class of its stored ``failure_reason`` (None: it did not fail, or no class names it)."""
        return FailureClass.of(self.failure_reason)

    @property
    def reason(self) -> str | None:
        """Why it failed (its failure class) or why it was pruned."""
        return self.failure_reason or self.pruned_reason

    @property
    def soak_stable(self) -> bool | None:
        """``tuner validate``'s verdict on it (None: not soaked)."""
        return (self.user_attrs.get(VALIDATION) or {}).get("stable")

    @property
    def throughput_by_level(self) -> dict[int, float]:
        return {level.concurrency: level.output_throughput for level in self.levels}

    def level_at(self, concurrency: int) -> Level | None:
        """Its level at ``concurrency`` (None: not measured)."""
        return next((level for level in self.levels if level.concurrency == concurrency), None)

    @property
    def runs_levels(self) -> tuple[tuple[Level, ...], ...]:
        """The levels of each of its runs: its own, then each re-measure's that completed."""
        again = (self.user_attrs.get(REPEATS) or {}).get("levels") or []
        return (self.levels, *(read_levels(stored) for stored in again))

    def spread(self, noise: float = 0.0) -> Spread | None:
        """Its value over its runs (the re-measures of :mod:`tuner.study.loop._confirm`, if any),
        each run read at the level its own figure came from (like for like)."""
        repeats = self.user_attrs.get(REPEATS)
        concurrency, at_level = self._at_own_level(repeats)
        return spread_of(self.value, repeats, noise, at_level, concurrency)

    def _at_own_level(
        self, repeats: Mapping[str, Any] | None
    ) -> tuple[int | None, list[RunFigure] | None]:
        """Each run's figure at the level of its value (None: re-runs stored without levels, a
        run that did not measure that level clean, or a value no level of its own gives, as a
        goodput rate search's: each run's value then)."""
        if self.value is None or not repeats or not repeats.get("levels"):
            return None, None
        own = figures_by_level(self.levels, self.metric, self.max_failed_fraction)
        at = next(
            (c for c, f in own.items() if math.isclose(f.value, self.value, rel_tol=1e-9)), None
        )
        if at is None:
            return None, None
        runs = [own[at]]
        for levels in self.runs_levels[1:]:
            figure = figures_by_level(levels, self.metric, self.max_failed_fraction).get(at)
            if figure is not None:
                runs.append(figure)
        if len(runs) != len(repeats.get("values") or ()):  # a run without that level: each value
            return None, None
        return at, [RunFigure(f.value, f.bound) for f in runs]

    @property
    def mean_value(self) -> float | None:
        """The value, or its mean over the re-measured runs."""
        spread = self.spread()
        return spread.mean if spread is not None else None

    def rank(self, noise: float) -> tuple[float, float, int]:
        """What ranks it against other trials: its mean less one standard error of that mean
        at the study's relative run-to-run ``noise`` (``mean x noise / sqrt(runs)``), then its
        mean, then its runs.

        The best of many trials measured once is the one whose noise was kindest: re-measured,
        its mean falls. Ranked by the mean alone, a trial measured once would then outrank it
        on its own single lucky run; by the lower figure it must read more by more than the
        difference in standard errors (at 2.2% noise, 0.93% against three runs). The study's
        noise, not the trial's own spread, sets the standard error: three runs tell a spread
        too roughly to rank by, and the lucky first run would widen it. Trials measured once
        each rank as by their value."""
        spread = self.spread()
        if spread is None:
            return (0.0, 0.0, 0)
        return rank_of(spread.mean, spread.runs, noise)


def read_record(
    trial: FrozenTrial, metric: str, max_failed_fraction: float, study_attrs: Mapping[str, Any]
) -> TrialRecord:
    """``trial`` as a :class:`TrialRecord`; ``clean`` by the objective's ``metric`` and
    ``max_failed_fraction``; the study's soak result and re-measures of it (``study_attrs``)
    joined to its attributes."""
    ua = dict(trial.user_attrs)
    for key in (
        VALIDATION,
        REPEATS,
    ):  # a finished trial's attributes are closed: kept on the study
        if str(trial.number) in (study_attrs.get(key) or {}):
            ua[key] = study_attrs[key][str(trial.number)]
    complete = trial.state == TrialState.COMPLETE
    config = dict(ua.get(CONFIG) or {})
    stored_chosen_by = str(ua.get(CHOSEN_BY) or "")
    levels = read_levels(ua.get(LEVELS))
    outcome = outcome_of(trial)
    return TrialRecord(
        number=trial.number,
        state=trial.state,
        config=config,
        outcome=outcome,
        value=trial.values[0] if complete and trial.values else None,
        params=dict(trial.params),
        is_baseline=bool(ua.get(IS_BASELINE)),
        reused_from=ua.get(REUSED_FROM),
        config_key=ua.get(CONFIG_KEY),
        chosen_by=stored_chosen_by or ("baseline" if ua.get(IS_BASELINE) else ""),
        move=read_move(ua.get(MOVE), stored_chosen_by, config),
        stable=bool(ua.get(STABLE)) and complete,
        failure_reason=ua.get(FAILURE_REASON)
        or (str(FailureClass.WORKER_DIED) if trial.state == TrialState.FAIL else None),
        pruned_reason=ua.get(PRUNED_REASON),
        detail=ua.get(FAILURE_DETAIL),
        command_line=ua.get(COMMAND_LINE),
        levels=levels,
        clean=clean_levels(levels, metric, max_failed_fraction),
        reported=dict(trial.intermediate_values),
        observations={
            k: float(v) for k, v in (ua.get(OBSERVATIONS) or {}).items() if v is not None
        },
        observation_sources=observation_sources(ua),
        copied_outcome=outcome_of(trial, follow_reuse=True) if outcome == Outcome.REUSED else None,
        user_attrs=ua,
        metric=metric,
        max_failed_fraction=max_failed_fraction,
    )
