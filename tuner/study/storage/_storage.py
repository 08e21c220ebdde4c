"""Where a study lives, how it is opened or resumed, and the fingerprint that guards resuming.

Defaults: the file ``studies/<stem>.db`` for real runs and ``studies/<stem>-emulated.db`` with
``--emulate``, relative to the current directory, in Optuna's JournalStorage format: the one
format ``optuna-dashboard studies/<stem>.db`` opens from a bare path. Its writers take Optuna's
file lock (the symlink lock, as optuna-dashboard does), so several workers on one machine share
it. ``--storage`` takes a path (a journal file; an SQLite file is recognised by its header) or a
database URL (``sqlite:///...``, ``postgresql://...``). An SQLite study at the old default path is
still read and resumed, with a one-line note. The study name is the search space's ``name``. A
study remembers the fingerprint of the search space and workload it was created with, and refuses
to resume when they changed, unless told to.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, NamedTuple

import optuna
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock

from tuner.study.storage._access import remember_storage
from tuner.study.storage._stale import retry_dead_worker
from tuner.errors import ConfigError
from tuner.study.record import FINGERPRINT

STALE_LOCK_S = (
    30  # a journal lock unchanged this long was left by a killed writer (Optuna's default)
)

__all__ = [
    "default_storage_url",
    "ResolvedStorage",
    "resolve_storage",
    "storage_file",
    "open_storage",
    "create_or_resume",
    "load_existing_study",
]


SQLITE_HEADER = b"SQLite format 3\x00"


def default_storage_url(
    space_path: Path, emulate: bool, studies_dir: Path = Path("studies")
) -> str:
    """``studies/<stem>[-emulated].db``: a JournalStorage file (see the module docstring)."""
    stem = space_path.stem + ("-emulated" if emulate else "")
    return str(studies_dir / (stem + ".db"))


def _is_sqlite(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


class ResolvedStorage(NamedTuple):
    """The storage URL to open, and the note to print about it (None: nothing to say)."""

    url: str
    note: str | None


def resolve_storage(url: str) -> ResolvedStorage:
    """The storage URL to open, and a one-line note when a bare path holds an SQLite study.

    A bare path names a JournalStorage file, except when the file there is an SQLite database (a
    study of the tuner's earlier default): it is then opened as ``sqlite:///<path>``.
    """
    if "://" in url or not _is_sqlite(Path(url)):
        return ResolvedStorage(url, None)
    sqlite_url = f"sqlite:///{url}"
    return ResolvedStorage(
        sqlite_url,
        (
            f"note: {url} is an SQLite study (the earlier default format); reading it as {sqlite_url} "
            f"(optuna-dashboard {sqlite_url})"
        ),
    )


def storage_file(url: str) -> Path | None:
    """The local file a storage URL names (a journal file or an SQLite database), else None."""
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///"))
    return None if "://" in url else Path(url)


def _with_driver(url: str) -> str:
    """``postgresql://`` with the driver the project installs (SQLAlchemy 2.1 would pick psycopg 3)."""
    return (
        "postgresql+psycopg2://" + url.removeprefix("postgresql://")
        if url.startswith("postgresql://")
        else url
    )


def _open_journal(path: Path, heartbeat_interval: int | None) -> JournalStorage:
    if heartbeat_interval is not None:
        raise ConfigError(
            f"--heartbeat-seconds: the journal file {path} keeps no heartbeats; "
            "fix: pass --storage sqlite:///PATH.db or postgresql://... with it"
        )
    if path.is_dir():
        raise ConfigError(
            f"--storage {path}: is a folder; fix: give a file such as studies/NAME.db"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        # The lock on the absolute path: Optuna's symlink lock points at the path it is given,
        # and releases a lock a killed writer left (after STALE_LOCK_S) only when it can read
        # the age through the link; a link to a relative path dangles, and the next run waited
        # forever.
        return JournalStorage(
            JournalFileBackend(
                str(path), lock_obj=JournalFileSymlinkLock(str(path.absolute()), STALE_LOCK_S)
            )
        )
    except Exception as exc:  # a file that is not an Optuna journal: one line for the user
        raise ConfigError(
            f"--storage {path}: not an Optuna journal or SQLite study file ({type(exc).__name__}: "
            f"{exc}); fix: give the .db file of a study, or a database URL".splitlines()[0]
        ) from exc


def open_storage(url: str, heartbeat_interval: int | None = None) -> BaseStorage:
    """An Optuna storage: a JournalStorage file (a bare path), SQLite or PostgreSQL (a URL).

    The file's folder is created if missing.
    """
    url, _ = resolve_storage(url)
    if "://" not in url:
        return _open_journal(Path(url), heartbeat_interval)
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    elif not url.startswith(("postgresql", "mysql")):
        raise ConfigError(
            f"--storage {url}: not a database URL; fix: use a file path, sqlite:///path.db or postgresql://..."
        )
    try:
        return RDBStorage(
            _with_driver(url),
            heartbeat_interval=heartbeat_interval,
            grace_period=None if heartbeat_interval is None else 3 * heartbeat_interval,
            heartbeat_stale_trial_callback=retry_dead_worker
            if heartbeat_interval is not None
            else None,
            engine_kwargs={"connect_args": {"timeout": 30}} if url.startswith("sqlite") else None,
        )
    except Exception as exc:  # SQLAlchemy raises many kinds: one line for the user
        raise ConfigError(
            f"--storage {url}: cannot open ({type(exc).__name__}: {exc})".splitlines()[0]
        ) from exc


def create_or_resume(
    storage: BaseStorage,
    study_name: str,
    fingerprint: str,
    *,
    sampler: optuna.samplers.BaseSampler,
    pruner: optuna.pruners.BasePruner | None,
    allow_changed: bool,
    attrs: dict[str, object],
    directions: tuple[Literal["minimize", "maximize"], ...] = ("maximize",),
) -> optuna.Study:
    """Create the study, or resume it when its fingerprint matches (or ``allow_changed``).

    ``directions`` has two entries in multi-objective mode (throughput up, a latency down).
    """
    existing = {
        s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)
    }
    study = optuna.create_study(
        storage=storage,
        study_name=study_name,
        sampler=sampler,
        pruner=pruner,
        directions=list(directions),
        load_if_exists=True,
    )
    stored = study.user_attrs.get(FINGERPRINT)
    if (
        study_name in existing
        and stored is not None
        and stored != fingerprint
        and not allow_changed
    ):
        raise ConfigError(
            f"study {study_name!r}: the search space or workload changed since it was created "
            f"(fingerprint {stored[:12]} != {fingerprint[:12]}); fix: use --study-name NEW, "
            "another --storage, or --allow-changed to resume anyway"
        )
    study.set_user_attr(FINGERPRINT, fingerprint)
    for key, value in attrs.items():
        study.set_user_attr(key, value)
    return remember_storage(study, storage)


def load_existing_study(url: str, study_name: str) -> optuna.Study:
    """Load a study for reading; a missing storage or study is a one-line error naming what exists."""
    path = storage_file(url)
    if path is not None and not path.is_file():
        found = sorted(p.name for p in path.parent.glob("*.db")) if path.parent.is_dir() else []
        raise ConfigError(
            f"no study database at {path}; existing: {', '.join(found) or 'none'}; "
            "fix: run `tuner optimize` first or pass --storage"
        )
    storage = open_storage(url)
    names = [
        s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)
    ]
    if study_name not in names:
        raise ConfigError(
            f"no study named {study_name!r} in {url}; existing: {', '.join(names) or 'none'}; "
            "fix: pass --study-name"
        )
    return remember_storage(optuna.load_study(study_name=study_name, storage=storage), storage)
