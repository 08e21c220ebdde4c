"""Several workers: no configuration is probed before the baseline's probe outputs exist.

The correctness probe compares a trial's greedy outputs with the baseline's (the study attribute
``probe_reference``). With one worker the baseline runs first, so the reference is there before
any other trial. With several, a second worker may ask for a trial while the first still runs the
baseline; a configuration that serves garbage (``fa3`` on SM120) would then pass a probe with
nothing to compare against and could end COMPLETE, even best. So a worker waits, between trials
and outside any trial, while the baseline runs elsewhere. Dead workers' trials are failed while
it waits (heartbeats), so a baseline whose worker died is queued again and the next ``ask`` of
this worker takes it: the wait cannot outlive the baseline.
"""

from __future__ import annotations

import time
from typing import Any

import optuna
from optuna.trial import TrialState

from tuner.study.objective import PROBE_REFERENCE_ATTR
from tuner.study.pruner import BASELINE_ATTR
from tuner.study.storage import fail_stale_trials

__all__ = ["wait_for_probe_reference"]


def _baseline_running(study: optuna.Study) -> bool:
    return any(
        t.user_attrs.get(BASELINE_ATTR)
        for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    )


def wait_for_probe_reference(
    study: optuna.Study, space: Any, say: Any = print, poll_s: float = 2.0
) -> float:
    """Return once the reference exists or no baseline is running (then the next ``ask`` gives
    the queued baseline, or the baseline has ended without one); the seconds waited."""
    if not space.probe.prompts:
        return 0.0
    started = time.monotonic()
    announced = False
    while PROBE_REFERENCE_ATTR not in study.user_attrs and _baseline_running(study):
        if not announced:
            say("waiting for the baseline, running on another worker: its probe outputs are the "
                "reference every other configuration is checked against")
            announced = True
        time.sleep(poll_s)
        fail_stale_trials(study)
    return time.monotonic() - started
