"""Several workers: no configuration is probed before the baseline's probe outputs exist.

The correctness probe compares a trial's greedy outputs with the baseline's (the study attribute
``probe_reference``). With one worker the baseline runs first, so the reference is there before
any other trial. With several, a second worker may ask for a trial while the first still runs the
baseline; a configuration that serves garbage (``fa3`` on SM120) would then pass a probe with
nothing to compare against and could end COMPLETE, even best. So a worker waits, between trials
and outside any trial, while the baseline runs elsewhere. Dead workers' trials are failed while
it waits (heartbeats), so a baseline whose worker died is queued again and the next ``ask`` of
this worker takes it: the wait cannot outlive the baseline.

A baseline that failed gives no reference at all: every later probe would pass whatever the server
says, so the run stops there (:func:`require_probe_reference`) rather than spend host time on
configurations it cannot check.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import TrialState

from tuner.errors import TunerError
from tuner.study.record import PROBE_REFERENCE
from tuner.study.record import FAILURE_REASON, IS_BASELINE
from tuner.study.storage import fail_stale_trials

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = ["require_probe_reference", "wait_for_probe_reference"]


def _baseline_running(study: optuna.Study) -> bool:
    return any(
        t.user_attrs.get(IS_BASELINE)
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    )


def wait_for_probe_reference(
    study: optuna.Study, space: SearchSpace, say: Any = print, poll_s: float = 2.0
) -> float:
    """Return once the reference exists or no baseline is running (then the next ``ask`` gives
    the queued baseline, or the baseline has ended without one); the seconds waited."""
    if not space.probe.prompts:
        return 0.0
    started = time.monotonic()
    announced = False
    while PROBE_REFERENCE not in study.user_attrs and _baseline_running(study):
        if not announced:
            say(
                "waiting for the baseline, running on another worker: its probe outputs are the "
                "reference every other configuration is checked against"
            )
            announced = True
        time.sleep(poll_s)
        fail_stale_trials(study)
    return time.monotonic() - started


def require_probe_reference(study: optuna.Study, space: SearchSpace) -> None:
    """Raise when the probe has no reference and no baseline is queued or running to give one.

    Raises:
        TunerError: the baseline ended without probe outputs (its reason named), before any
            other configuration spends host time.
    """
    if not space.probe.prompts or PROBE_REFERENCE in study.user_attrs:
        return
    baselines = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get(IS_BASELINE)]
    if any(
        t.state in (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE) for t in baselines
    ):
        return  # queued, running, or run by a runner without a probe (the search benchmark's model)
    last = baselines[-1] if baselines else None
    why = (
        f"baseline trial {last.number} ended {last.state.name} "
        f"({last.user_attrs.get(FAILURE_REASON) or 'no reason recorded'})"
        if last is not None
        else "no baseline trial ran"
    )
    raise TunerError(
        f"no probe reference: {why}, so the correctness probe cannot check any other "
        "configuration; fix: read that trial's failure and log (tuner trials SPACE), then correct "
        "the baseline in SPACE and start a new study (--study-name)"
    )
