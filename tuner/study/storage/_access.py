"""What the tuner reads of a study through Optuna's public API only: the storage it was opened
on, and one trial by its number."""

from __future__ import annotations

from weakref import WeakKeyDictionary

import optuna
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial

__all__ = ["frozen_trial", "remember_storage", "storage_of"]

# The storage each study of the tuner was opened on (an optuna.Study does not name it publicly).
_STORAGE_OF: WeakKeyDictionary[optuna.Study, BaseStorage] = WeakKeyDictionary()


def remember_storage(study: optuna.Study, storage: BaseStorage) -> optuna.Study:
    """Note that ``study`` lives in ``storage``; returns the study."""
    _STORAGE_OF[study] = storage
    return study


def storage_of(study: optuna.Study) -> BaseStorage | None:
    """The storage ``study`` was opened on by the tuner (None: a study made elsewhere, such as
    one in memory)."""
    return _STORAGE_OF.get(study)


def frozen_trial(study: optuna.Study, number: int) -> FrozenTrial:
    """The study's trial ``number`` as stored now."""
    trials = study.get_trials(deepcopy=False)
    if number < len(trials) and trials[number].number == number:
        return trials[number]
    return next(trial for trial in trials if trial.number == number)
