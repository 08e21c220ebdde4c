"""Trials whose worker died: found (heartbeats, or a dead PID on this machine), failed, and their
configurations queued again (the worker died, not the configuration).

Heartbeats are Optuna's (an RDB storage opened with ``heartbeat_interval``): a worker records one
for its running trial (:func:`heartbeat`), and :func:`fail_stale_trials` runs Optuna's public
``optuna.storages.fail_stale_trials``, which fails a trial silent for the grace period and calls
the storage's stale-trial callback (:func:`retry_dead_worker`, set by ``open_storage``) for each
trial it failed; when two workers find the same stale trial, only the one whose state change
wins calls it. Such a trial stores no failure reason (a finished trial takes no attribute): a
FAIL without one reads as ``worker-died`` (:class:`tuner.study.record.TrialRecord`).
"""

from __future__ import annotations

import os
import socket
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.storages import BaseStorage, RDBStorage
from optuna.trial import FrozenTrial, TrialState

from tuner.study.record import KEPT_ON_RETRY, RETRY_OF, WORKER, write_dead_worker
from tuner.study.storage._access import storage_of

__all__ = [
    "fail_stale_trials",
    "heartbeat",
    "mark_dead_workers",
    "retry_dead_worker",
    "retry_later",
    "trial_id",
    "worker_id",
]


def fail_stale_trials(study: optuna.Study) -> None:
    """FAIL the RUNNING trials whose worker stopped sending heartbeats, and queue their
    configurations again (:func:`retry_dead_worker`); nothing without heartbeats."""
    with warnings.catch_warnings():
        warnings.simplefilter(
            "ignore", ExperimentalWarning
        )  # public, marked experimental since 2.9
        optuna.storages.fail_stale_trials(study)


def retry_dead_worker(study: optuna.Study, trial: FrozenTrial) -> None:
    """The storage's stale-trial callback: queue the configuration of a trial whose worker died."""
    retry_later(study, trial)


def retry_later(study: optuna.Study, trial: FrozenTrial) -> None:
    """Queue a trial's configuration again (only for trials whose worker died)."""
    if not trial.params:
        return
    keep = {k: v for k, v in trial.user_attrs.items() if k in KEPT_ON_RETRY}
    study.enqueue_trial(trial.params, user_attrs={**keep, RETRY_OF: trial.number})


def trial_id(storage: BaseStorage, study: optuna.Study, number: int) -> int:
    """The storage's id of the study's trial ``number``."""
    return storage.get_trial_id_from_study_id_trial_number(
        storage.get_study_id_from_name(study.study_name), number
    )


@contextmanager
def heartbeat(study: optuna.Study, number: int) -> Iterator[None]:
    """Record heartbeats for the study's running trial ``number`` while inside (nothing where the
    study's storage keeps none)."""
    storage = storage_of(study)
    interval = storage.get_heartbeat_interval() if isinstance(storage, RDBStorage) else None
    if interval is None:
        yield
        return
    assert isinstance(storage, RDBStorage)
    beating = trial_id(storage, study, number)
    stop = threading.Event()

    def beat() -> None:
        while True:
            storage.record_heartbeat(beating)
            if stop.wait(interval):
                return

    thread = threading.Thread(target=beat, name=f"heartbeat-{number}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def mark_dead_workers(study: optuna.Study) -> int:
    """Fail RUNNING trials left by a tuner on this machine that is no longer alive (and queue
    their configurations again: the worker died, not the configuration)."""
    storage = storage_of(study)
    if storage is None:
        return 0  # a study in memory: no other process left a trial in it
    me = socket.gethostname()
    marked = 0
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = str(trial.user_attrs.get(WORKER, ""))
        machine, _, pid = worker.rpartition(":")
        if machine != me or not pid.isdigit() or _pid_alive(int(pid)):
            continue
        write_dead_worker(
            storage,
            trial_id(storage, study, trial.number),
            "the tuner running this trial was killed",
        )
        retry_later(study, trial)
        marked += 1
    return marked


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
