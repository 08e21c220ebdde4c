"""``tpe``: Optuna's TPE with the settings the tuner always used, and crashes that teach it.

Optuna's TPE reads only COMPLETE and PRUNED trials, so a configuration that crashed its server
(FAIL) tells it nothing and it happily samples the crash's twin. :class:`CrashAwareTPESampler`
shows TPE each FAIL by its configuration as an infeasible trial (PRUNED with a constraint value
of 1: TPE puts infeasible trials below every feasible one), and hides the trials the feasibility
gate skipped without running (they measured nothing; telling TPE they were bad would let the
gate confirm its own guesses). It does so through Optuna's public API: TPE samples from an
in-memory study that holds the trials as TPE is to see them (:func:`seen_by_tpe`), in the same
order; the study itself keeps its trials as recorded, FAIL when broken.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState, create_trial

from tuner.study.record import Outcome, outcome_of
from tuner.study.strategies._base import SpaceStrategy

__all__ = [
    "TpeStrategy",
    "CrashAwareTPESampler",
    "tpe_settings",
    "seen_by_tpe",
    "CRASH_CONSTRAINT",
]

CRASH_CONSTRAINT = "crashed"  # the constraint an infeasible (crashed) trial violates, by 1

# The states TPE reads (RUNNING: with constant_liar, a trial still running elsewhere).
_READ = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)


def tpe_settings(seed: int | None) -> dict[str, Any]:
    """The TPE settings of ``tuner optimize`` (as ``make_sampler("tpe")`` always had them)."""
    # constant_liar: with several workers, a trial still running elsewhere counts as a poor one,
    # so two workers do not sample the same neighbourhood (no effect with one worker).
    return {
        "seed": seed,
        "multivariate": True,
        "group": True,
        "n_startup_trials": 6,
        "constant_liar": True,
    }


def _shown(trial: FrozenTrial) -> FrozenTrial | None:
    """``trial`` as TPE is to see it: a crash by its configuration as an infeasible PRUNED
    trial, a gated skip not at all (None), the rest as recorded."""
    outcome = outcome_of(trial, follow_reuse=True)
    if outcome == Outcome.GATED:
        return None
    if outcome == Outcome.FAILED and trial.params:
        return create_trial(
            state=TrialState.PRUNED,
            params=trial.params,
            distributions=trial.distributions,
            system_attrs=trial.system_attrs,
            constraints={CRASH_CONSTRAINT: 1.0},
        )
    if trial.state not in _READ:
        return None
    return create_trial(
        state=trial.state,
        values=trial.values,
        params=trial.params,
        distributions=trial.distributions,
        system_attrs=trial.system_attrs,
        intermediate_values=trial.intermediate_values,
    )


def seen_by_tpe(study: optuna.Study) -> tuple[optuna.Study, dict[int, FrozenTrial]]:
    """An in-memory study with ``study``'s trials as TPE is to see them (see :func:`_shown`), in
    the same order, and the map from a trial's number in ``study`` to its copy there."""
    seen = optuna.create_study(
        storage=optuna.storages.InMemoryStorage(),
        directions=study.directions,
        study_name=study.study_name,
    )
    numbers = []
    for trial in study.get_trials(deepcopy=False):
        shown = _shown(trial)
        if shown is not None:
            seen.add_trial(shown)
            numbers.append(trial.number)
    return seen, dict(zip(numbers, seen.get_trials(deepcopy=False)))


class CrashAwareTPESampler(optuna.samplers.TPESampler):
    """TPE that learns from FAIL trials (as infeasible) and ignores the gate's skips."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cached: tuple[Any, optuna.Study, dict[int, FrozenTrial]] | None = None

    def _seen(self, study: optuna.Study, trial: FrozenTrial) -> tuple[optuna.Study, FrozenTrial]:
        """The study as TPE sees it, and ``trial`` (the one being sampled) in it; made again
        only when a trial was added, changed state or (another one) set a parameter."""
        trials = study.get_trials(deepcopy=False)
        key = (
            study.study_name,
            tuple(
                (
                    t.number,
                    t.state,
                    -1 if t.number == trial.number else len(t.params),
                    len(t.system_attrs),
                )
                for t in trials
            ),
        )
        if self._cached is None or self._cached[0] != key:
            seen, by_number = seen_by_tpe(study)
            self._cached = (key, seen, by_number)
        _, seen, by_number = self._cached
        return seen, by_number.get(trial.number, trial)

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, Any]:
        return super().infer_relative_search_space(*self._seen(study, trial))

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]
    ) -> dict[str, Any]:
        return super().sample_relative(*self._seen(study, trial), search_space)

    def sample_independent(
        self, study: optuna.Study, trial: FrozenTrial, param_name: str, param_distribution: Any
    ) -> Any:
        return super().sample_independent(
            *self._seen(study, trial), param_name, param_distribution
        )


class TpeStrategy(SpaceStrategy):
    """TPE as the tuner always ran it; crashes teach it (see the module docstring)."""

    name = "tpe"

    def sampler(self) -> optuna.samplers.BaseSampler:
        return CrashAwareTPESampler(**tpe_settings(self.seed))
