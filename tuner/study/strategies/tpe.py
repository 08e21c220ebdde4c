"""``tpe``: Optuna's TPE with the settings the tuner always used, and crashes that teach it.

Optuna's TPE reads only COMPLETE and PRUNED trials, so a configuration that crashed its server
(FAIL) tells it nothing and it happily samples the crash's twin. :class:`CrashAwareTPESampler`
shows TPE each FAIL by its configuration as an infeasible trial (a constraint value of 1: TPE
puts infeasible trials below every feasible one), and hides the trials the feasibility gate
skipped without running (they measured nothing; telling TPE they were bad would let the gate
confirm its own guesses). The trials themselves stay as recorded: FAIL when broken.
"""

from __future__ import annotations

import copy
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.study.record import Outcome, outcome_of
from tuner.study.strategies._base import SpaceStrategy

__all__ = ["TpeStrategy", "CrashAwareTPESampler", "tpe_settings", "CRASH_CONSTRAINT"]

CRASH_CONSTRAINT = "constraints:crashed"  # Optuna's system attribute for a constraint "crashed"


def tpe_settings(seed: int | None) -> dict[str, Any]:
    """The TPE settings of ``tuner optimize`` (as ``make_sampler("tpe")`` always had them)."""
    # constant_liar: with several workers, a trial still running elsewhere counts as a poor one,
    # so two workers do not sample the same neighbourhood (no effect with one worker).
    return {"seed": seed, "multivariate": True, "group": True, "n_startup_trials": 6, "constant_liar": True}


def _as_infeasible(trial: FrozenTrial) -> FrozenTrial:
    """A copy of ``trial`` that TPE reads as infeasible: PRUNED, no value, constraint 1."""
    shown = copy.copy(trial)
    shown.state = TrialState.PRUNED
    shown.values = None
    shown.intermediate_values = {}
    shown.system_attrs = {**trial.system_attrs, CRASH_CONSTRAINT: 1.0}
    return shown


class _StudyAsTpeSeesIt:
    """The study with crashes shown as infeasible trials and gated skips hidden."""

    def __init__(self, study: optuna.Study, cache: dict[int, FrozenTrial]) -> None:
        self._study = study
        self._cache = cache

    def __getattr__(self, name: str) -> Any:
        return getattr(self._study, name)

    def _get_trials(self, deepcopy: bool = True, states: Any = None, use_cache: bool = False) -> list[FrozenTrial]:
        shown = []
        for trial in self._study._get_trials(deepcopy=False, states=None, use_cache=use_cache):
            outcome = outcome_of(trial, follow_reuse=True)
            if outcome == Outcome.GATED:
                continue
            if outcome == Outcome.FAILED and trial.params:
                trial = self._cache.setdefault(trial._trial_id, _as_infeasible(trial))
            if states is None or trial.state in states:
                shown.append(trial)
        return shown

    def get_trials(self, deepcopy: bool = True, states: Any = None) -> list[FrozenTrial]:
        return self._get_trials(deepcopy=False, states=states)


class CrashAwareTPESampler(optuna.samplers.TPESampler):
    """TPE that learns from FAIL trials (as infeasible) and ignores the gate's skips."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._infeasible: dict[int, FrozenTrial] = {}

    def _seen(self, study: optuna.Study) -> Any:
        return _StudyAsTpeSeesIt(study, self._infeasible)

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, Any]:
        return super().infer_relative_search_space(self._seen(study), trial)

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]) -> dict[str, Any]:
        return super().sample_relative(self._seen(study), trial, search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: Any) -> Any:
        return super().sample_independent(self._seen(study), trial, param_name, param_distribution)


class TpeStrategy(SpaceStrategy):
    """TPE as the tuner always ran it; crashes teach it (see the module docstring)."""

    name = "tpe"

    def sampler(self) -> optuna.samplers.BaseSampler:
        return CrashAwareTPESampler(**tpe_settings(self.seed))
