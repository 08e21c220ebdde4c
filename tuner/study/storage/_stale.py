"""Trials whose worker died: found (heartbeats, or a dead PID on this machine), failed
``worker-died``, and their configurations queued again (the worker died, not the configuration).
"""

from __future__ import annotations

import os
import socket

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages._heartbeat import is_heartbeat_enabled
from optuna.trial import TrialState

from tuner.study.record import KEPT_ON_RETRY, RETRY_OF, WORKER, write_dead_worker

__all__ = ["fail_stale_trials", "mark_dead_workers", "retry_later", "worker_id"]


def fail_stale_trials(study: optuna.Study) -> list[int]:
    """FAIL ``worker-died`` the RUNNING trials whose worker stopped sending heartbeats, and queue
    their configurations again; the numbers of the trials failed here.

    Optuna's own ``fail_stale_trials`` fails the trial first and calls its callback after, when a
    finished trial can no longer take the reason; so the reason is written first here. When two
    workers find the same stale trial, only the one whose state change wins queues it again.
    """
    storage = study._storage
    if not is_heartbeat_enabled(storage):
        return []
    failed = []
    for trial_id in storage._get_stale_trial_ids(study._study_id):  # type: ignore[attr-defined]
        try:
            if write_dead_worker(storage, trial_id, "its worker stopped sending heartbeats; queued again"):
                failed.append(trial_id)
        except UpdateFinishedTrialError:  # another worker failed it first
            continue
    for trial_id in failed:
        retry_later(study, storage.get_trial(trial_id))
    return [storage.get_trial(trial_id).number for trial_id in failed]


def retry_later(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    """Queue a trial's configuration again (only for trials whose worker died)."""
    if not trial.params:
        return
    keep = {k: v for k, v in trial.user_attrs.items() if k in KEPT_ON_RETRY}
    study.enqueue_trial(trial.params, user_attrs={**keep, RETRY_OF: trial.number})


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def mark_dead_workers(study: optuna.Study) -> int:
    """Fail RUNNING trials left by a tuner on this machine that is no longer alive (and queue
    their configurations again: the worker died, not the configuration)."""
    me = socket.gethostname()
    marked = 0
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = str(trial.user_attrs.get(WORKER, ""))
        machine, _, pid = worker.rpartition(":")
        if machine != me or not pid.isdigit() or _pid_alive(int(pid)):
            continue
        write_dead_worker(study._storage, trial._trial_id, "the tuner running this trial was killed")
        retry_later(study, trial)
        marked += 1
    return marked


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
