"""Where a study lives: file, SQL or journal storage, create or resume (`_storage`), the trials
of workers that died (`_stale`), and what the tuner reads of a study through Optuna's public API
(`_access`).
"""

from __future__ import annotations

from tuner.study.storage._storage import (
    ResolvedStorage,
    default_storage_url,
    resolve_storage,
    storage_file,
    open_storage,
    create_or_resume,
    load_existing_study,
)
from tuner.study.storage._stale import (
    fail_stale_trials,
    heartbeat,
    mark_dead_workers,
    retry_dead_worker,
    retry_later,
    trial_id,
    worker_id,
)
from tuner.study.storage._access import frozen_trial, remember_storage, storage_of
from tuner.study.storage import _access, _stale, _storage

__all__ = [
    *_storage.__all__,
    *_stale.__all__,
    *_access.__all__,
]  # each module lists its public names once
