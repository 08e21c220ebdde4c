"""Where a study lives: file, SQL or journal storage, create or resume (`_storage`), and the trials
of workers that died (`_stale`).
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
from tuner.study.storage._stale import fail_stale_trials, mark_dead_workers, retry_later, worker_id
from tuner.study.storage import _stale, _storage

__all__ = [*_storage.__all__, *_stale.__all__]  # each module lists its public names once
