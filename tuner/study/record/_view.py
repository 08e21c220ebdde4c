"""One typed view of the study, read once: :class:`StudyView`.

:func:`read_view` turns every trial into a :class:`TrialRecord`. The optimize loop reads it once
per iteration (strategies, the reuse of identical configurations and the pruning rule read this
view instead of scanning the trials and their string attributes themselves); the report,
``tuner trials``, ``tuner best`` and ``tuner export`` read the same view.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, cast

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.study.record._keys import EMULATED, REPEATS, STATED_NOISE
from tuner.study.record._noise import Noise, noise_of
from tuner.study.record._outcome import Outcome
from tuner.study.record._record import TrialRecord, read_record
from tuner.study.record._repeats import repeats_of

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = ["StudyView", "read_view"]

# Without a search space: the objective's defaults (what a record's ``clean`` figures are).
_DEFAULT_METRIC = "output_throughput"
_DEFAULT_MAX_FAILED_FRACTION = 0.01


@dataclass(frozen=True)
class StudyView:
    """Every trial of the study at one moment, in trial-number order.

    ``baseline``: the reference the search compares with (the baseline that ran and measured
    clean levels, not a copy); ``name``, ``attrs``: the study's name and user attributes.
    """

    records: tuple[TrialRecord, ...]
    baseline: TrialRecord | None
    name: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)
    _frozen: dict[int, FrozenTrial] = field(default_factory=dict, repr=False, compare=False)

    # -- what the search reads ------------------------------------------------------------------
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
        return max(done, key=lambda r: cast(float, r.value)) if done else None

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

    # -- what the report and the commands read --------------------------------------------------
    @cached_property
    def best_stable(self) -> TrialRecord | None:
        """The best COMPLETE trial whose every level ran clean (validated ones first, if any); a
        re-measured trial counts by its mean over its runs, less one standard error
        (:meth:`TrialRecord.rank`). None: no stable trial yet."""
        return self.best_stable_of(prefer_validated=True)

    def best_stable_of(self, *, prefer_validated: bool) -> TrialRecord | None:
        """:attr:`best_stable`, preferring validated trials or not."""
        stable = [
            r
            for r in self.records
            if r.stable and r.value is not None and r.soak_stable is not False
        ]
        if prefer_validated:
            validated = [r for r in stable if r.soak_stable]
            if validated:
                stable = validated
        return max(stable, key=lambda r: r.rank(self.noise.relative)) if stable else None

    @cached_property
    def baseline_trial(self) -> TrialRecord | None:
        """The baseline trial as shown: the one that completed, else the first that failed (a
        baseline that failed for a reason of the run, interrupted or host-error, runs again)."""
        baselines = [
            r
            for r in self.records
            if r.is_baseline and r.state in (TrialState.COMPLETE, TrialState.FAIL)
        ]
        return next(
            (r for r in baselines if r.state == TrialState.COMPLETE),
            baselines[0] if baselines else None,
        )

    @cached_property
    def noise(self) -> Noise:
        """The study's run-to-run noise (:mod:`tuner.study.record._noise`): what a figure's
        spread is never below, and what ranks re-measured trials."""
        return noise_of(self.records, self.emulated, self.attrs.get(STATED_NOISE))

    @property
    def emulated(self) -> bool:
        """True when the study ran on the emulated host (its figures are labelled so)."""
        return bool(self.attrs.get(EMULATED)) or any(
            r.user_attrs.get(EMULATED) for r in self.records
        )

    @property
    def label(self) -> str:
        """The suffix every emulated figure carries: `` (emulated)`` or nothing."""
        return " (emulated)" if self.emulated else ""

    @property
    def completed(self) -> list[TrialRecord]:
        """COMPLETE trials that ran on the host (reused copies left out), best first."""
        done = [r for r in self.records if r.state == TrialState.COMPLETE and r.value is not None]
        return sorted((r for r in done if r.reused_from is None), key=lambda r: -(r.value or 0.0))

    def top(self, count: int) -> list[TrialRecord]:
        """The ``count`` best completed trials other than the best stable and the baseline."""
        skip = {r.number for r in (self.best_stable, self.baseline_trial) if r is not None}
        return [r for r in self.completed if r.number not in skip][:count]

    def state_counts(self) -> dict[str, int]:
        """How many trials ended in each state (by Optuna's state name)."""
        counts: dict[str, int] = {}
        for record in self.records:
            counts[record.state.name] = counts.get(record.state.name, 0) + 1
        return counts


def read_view(study: optuna.Study, space: SearchSpace | None = None) -> StudyView:
    """Read the study ONCE into a :class:`StudyView` (clean levels by ``space.objective``; without
    a space, by the objective's defaults: output tokens/s, at most 1% failed)."""
    objective = space.objective if space is not None else None
    metric = objective.metric if objective is not None else _DEFAULT_METRIC
    limit = (
        objective.max_failed_fraction if objective is not None else _DEFAULT_MAX_FAILED_FRACTION
    )
    trials = study.get_trials(deepcopy=False)
    attrs = dict(study.user_attrs)
    attrs[REPEATS] = repeats_of(attrs)  # every re-run, however it was stored
    records = tuple(read_record(t, metric, limit, attrs) for t in trials)
    baseline = next(
        (r for r in records if r.is_baseline and r.reused_from is None and r.clean), None
    )
    return StudyView(records, baseline, study.study_name, attrs, {t.number: t for t in trials})
