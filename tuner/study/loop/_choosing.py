"""Which configuration runs next and why: the baseline queued first, a strategy's proposal
queued, and the ``chosen_by`` line of the trial Optuna hands out."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import optuna
from rich.console import Console

from tuner.errors import ConfigError
from tuner.study.record import (
    CHOSEN_BY,
    ENQUEUED,
    IS_BASELINE,
    MOVE,
    RETRY_OF,
    WARM_START_FROM,
    Outcome,
    StudyView,
    outcome_of,
)
from tuner.study.strategies import Strategy

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = ["WhyChosen", "ensure_baseline_queued", "queue_proposal", "why_chosen"]


def ensure_baseline_queued(study: optuna.Study, space: SearchSpace) -> None:
    for trial in study.get_trials(deepcopy=False):
        if not trial.user_attrs.get(IS_BASELINE):
            continue
        outcome = outcome_of(trial)
        if outcome in (Outcome.COMPLETE, Outcome.WAITING, Outcome.FAILED, Outcome.REUSED):
            return
        if (
            outcome == Outcome.RUNNING
        ):  # on another worker (a dead worker's is failed and queued again)
            return
    study.enqueue_trial(space.params_for_enqueue(space.baseline), user_attrs={IS_BASELINE: True})


class WhyChosen(NamedTuple):
    """A trial's ``chosen_by`` text, and whether the sampler drew it."""

    reason: str
    sampled: bool


def why_chosen(trial: optuna.Trial, strategy: Strategy) -> WhyChosen:
    """The trial's ``chosen_by`` and whether the sampler drew it (only those meet the gate)."""
    ua = trial.user_attrs
    if ua.get(CHOSEN_BY):
        return WhyChosen(str(ua[CHOSEN_BY]), False)
    if ua.get(IS_BASELINE):
        return WhyChosen("baseline", False)
    if ua.get(RETRY_OF) is not None:
        return WhyChosen(f"retry of trial {ua[RETRY_OF]} (its worker died)", False)
    if ua.get(WARM_START_FROM):
        return WhyChosen(f"warm start: {ua[WARM_START_FROM]}", False)
    if ua.get(ENQUEUED):
        return WhyChosen("enqueued by hand", False)
    return WhyChosen(strategy.sampled_reason, True)


def queue_proposal(
    study: optuna.Study, space: SearchSpace, strategy: Strategy, view: StudyView, console: Console
) -> None:
    """Queue the strategy's proposal, if it makes one and nothing else is queued."""
    if any(r.outcome == Outcome.WAITING for r in view.records):
        return
    proposal = strategy.propose(view)
    if proposal is None:
        return
    try:
        config = space.config(proposal.config, drop_inactive=True)
    except ConfigError as error:  # a strategy's mistake must not stop the study: the sampler draws
        console.print(
            f"[yellow]strategy {strategy.name}: proposal ignored[/]: {error}", highlight=False
        )
        return
    move = {MOVE: proposal.move.to_dict()} if proposal.move is not None else {}
    study.enqueue_trial(
        space.params_for_enqueue(config), user_attrs={CHOSEN_BY: proposal.reason, **move}
    )
