"""One typed view of the study, read once per iteration of the optimize loop.

:func:`read_view` turns every trial into a :class:`TrialRecord` (state, configuration, typed
outcome, clean per-level throughput, what the server log and telemetry said, why it was chosen);
strategies, the reuse of identical configurations and the pruning rule read this view instead
of scanning the trials and their string attributes themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.loadgen import LevelMetrics
from tuner.signals import Source
from tuner.study.record._keys import (
    CHOSEN_BY,
    CONFIG,
    CONFIG_KEY,
    FAILURE_REASON,
    IS_BASELINE,
    LEVELS,
    MOVE,
    OBSERVATIONS,
    REUSED_FROM,
)
from tuner.study.record._outcome import Outcome, outcome_of
from tuner.study.record._write import observation_sources
from tuner.study.strategies._legacy_moves import read_move
from tuner.study.strategies._moves import Move

__all__ = ["TrialRecord", "StudyView", "read_view", "clean_levels"]


def clean_levels(levels: list[dict[str, Any]], metric: str, max_failed_fraction: float) -> dict[int, float]:
    """``{concurrency: metric}`` of the levels that ran to their end with few failed requests.

    A goodput study's levels are request rates at one concurrency and carry no ``goodput`` figure:
    there the highest rate that met the SLO stands for them (in req/s, as the trial's value)."""
    values: dict[int, float] = {}
    for level in levels:
        total = level["completed"] + level["failed"]
        if level.get("stop_reason") is None and level["failed"] <= max_failed_fraction * max(1, total):
            figure = level.get(metric)
            if figure is None:  # a goodput rate level
                if not level.get("meets_slo") or level.get("request_rate") is None:
                    continue
                figure = level["request_rate"]
            concurrency = int(level["concurrency"])
            values[concurrency] = max(float(figure), values.get(concurrency, float(figure)))
    return values


@dataclass(frozen=True)
class TrialRecord:
    """One trial as the search sees it.

    ``levels``: concurrency -> output tokens/s of the clean levels only; ``observations``: what the
    server log and GPU telemetry said (``kv_tokens``, ``running_req_at_cap_fraction``,
    ``queue_growing``, ``token_usage_max``, ``gpu_power_w``, ...), names as in
    :mod:`tuner.signals`; ``observation_sources``: where each was read; ``chosen_by``: the one-line reason it was run; ``move``: the
    strategy's move that chose it, as data (None: the baseline, the sampler, by hand);
    ``metrics``: every level's figures as the client measured them (the client-level signals of
    :mod:`tuner.signals` read them).
    """

    number: int
    state: TrialState
    config: dict[str, Any]
    outcome: Outcome
    failure_reason: str | None
    levels: dict[int, float]
    value: float | None
    observations: dict[str, float]
    chosen_by: str
    is_baseline: bool = False
    reused_from: int | None = None
    config_key: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    move: Move | None = None
    observation_sources: dict[str, Source] = field(default_factory=dict)  # name -> where it was read
    metrics: tuple[LevelMetrics, ...] = ()

    @property
    def ran(self) -> bool:
        """Whether this trial ran its configuration on the host (COMPLETE, below the baseline,
        or FAIL by its configuration)."""
        return self.outcome.ran


@dataclass(frozen=True)
class StudyView:
    """Every trial of the study at one moment, in trial-number order."""

    records: tuple[TrialRecord, ...]
    baseline: TrialRecord | None
    _frozen: dict[int, FrozenTrial] = field(default_factory=dict, repr=False, compare=False)

    def complete(self) -> list[TrialRecord]:
        """COMPLETE trials that ran (not copies of earlier ones)."""
        return [r for r in self.records if r.outcome == Outcome.COMPLETE]

    def failed(self) -> list[TrialRecord]:
        """Trials that failed by their configuration (not copies of earlier ones)."""
        return [r for r in self.records if r.outcome == Outcome.FAILED]

    def ran(self) -> list[TrialRecord]:
        """Trials that ran on the host (COMPLETE, below the baseline, FAIL by configuration)."""
        return [r for r in self.records if r.ran]

    def best(self) -> TrialRecord | None:
        """The COMPLETE trial with the highest (first) objective value."""
        done = [r for r in self.complete() if r.value is not None]
        return max(done, key=lambda r: r.value) if done else None

    def finished_by_key(self) -> dict[str, TrialRecord]:
        """The trial whose result a new identical configuration reuses, by configuration key:
        one that ran and finished (COMPLETE, below the baseline, or a failure that would repeat)."""
        found: dict[str, TrialRecord] = {}
        for record in self.records:
            if record.config_key is not None and record.ran:
                found[record.config_key] = record
        return found

    def frozen(self, number: int) -> FrozenTrial:
        """Optuna's own record of a trial (to copy its attributes when reusing it)."""
        return self._frozen[number]


def _record(trial: FrozenTrial, metric: str, max_failed_fraction: float) -> TrialRecord:
    ua = trial.user_attrs
    outcome = outcome_of(trial)
    value = trial.values[0] if trial.state == TrialState.COMPLETE and trial.values else None
    config = dict(ua.get(CONFIG) or {})
    chosen_by = str(ua.get(CHOSEN_BY) or "")
    return TrialRecord(
        number=trial.number,
        state=trial.state,
        config=config,
        outcome=outcome,
        failure_reason=ua.get(FAILURE_REASON),
        levels=clean_levels(list(ua.get(LEVELS) or []), metric, max_failed_fraction),
        value=value,
        observations={k: float(v) for k, v in (ua.get(OBSERVATIONS) or {}).items() if v is not None},
        chosen_by=chosen_by,
        is_baseline=bool(ua.get(IS_BASELINE)),
        reused_from=ua.get(REUSED_FROM),
        config_key=ua.get(CONFIG_KEY),
        params=dict(trial.params),
        move=read_move(ua.get(MOVE), chosen_by, config),
        observation_sources=observation_sources(ua),
        metrics=_level_metrics(ua.get(LEVELS) or []),
    )


def _level_metrics(levels: list[dict[str, Any]]) -> tuple[LevelMetrics, ...]:
    """The stored levels read back as :class:`LevelMetrics` (a level stored without the
    client's figures, a goodput rate search's, is left out)."""
    out = []
    for level in levels:
        try:
            out.append(LevelMetrics.from_dict(level))
        except (TypeError, ValueError):
            continue
    return tuple(out)


def read_view(study: optuna.Study, space: Any) -> StudyView:
    """Read the study ONCE into a :class:`StudyView` (levels compared on ``space.objective``)."""
    objective = space.objective
    trials = study.get_trials(deepcopy=False)
    records = tuple(_record(t, objective.metric, objective.max_failed_fraction) for t in trials)
    baseline = next(
        (r for r in records if r.is_baseline and r.reused_from is None and r.levels), None
    )
    return StudyView(records, baseline, {t.number: t for t in trials})
