"""Where a study lives, how it is opened or resumed, and the fingerprint that guards resuming.

Defaults: ``sqlite:///studies/<stem>.db`` for real runs and ``sqlite:///studies/<stem>-emulated.db``
with ``--emulate``, relative to the current directory; the study name is the search space's
``name``. A study remembers the fingerprint of the search space and workload it was created with,
and refuses to resume when they changed, unless told to.
"""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.exceptions import UpdateFinishedTrialError
from optuna.storages import RDBStorage
from optuna.storages._heartbeat import is_heartbeat_enabled
from optuna.trial import TrialState

from tuner.errors import ConfigError
from tuner.study.optional_deps import require_sampler
from tuner.study import attrs

__all__ = [
    "default_storage_url",
    "open_storage",
    "create_or_resume",
    "load_existing_study",
    "make_sampler",
    "SAMPLERS",
    "FINGERPRINT_ATTR",
    "retry_later",
    "fail_stale_trials",
]

FINGERPRINT_ATTR = "tuner_fingerprint"
SAMPLERS = ("tpe", "random", "gp", "cmaes", "qmc", "nsga2", "bruteforce")


def default_storage_url(space_path: Path, emulate: bool, studies_dir: Path = Path("studies")) -> str:
    """``sqlite:///studies/<stem>[-emulated].db``."""
    stem = space_path.stem + ("-emulated" if emulate else "")
    return f"sqlite:///{studies_dir / (stem + '.db')}"


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
    for trial_id in storage._get_stale_trial_ids(study._study_id):
        try:
            storage.set_trial_user_attr(trial_id, attrs.FAILURE_REASON, "worker-died")
            storage.set_trial_user_attr(
                trial_id, attrs.FAILURE_DETAIL, "its worker stopped sending heartbeats; queued again"
            )
            if storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
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
    keep = {k: v for k, v in trial.user_attrs.items() if k in attrs.KEPT_ON_RETRY}
    study.enqueue_trial(trial.params, user_attrs={**keep, attrs.RETRY_OF: trial.number})


def _with_driver(url: str) -> str:
    """``postgresql://`` with the driver the project installs (SQLAlchemy 2.1 would pick psycopg 3)."""
    return "postgresql+psycopg2://" + url.removeprefix("postgresql://") if url.startswith("postgresql://") else url


def open_storage(url: str, heartbeat_interval: int | None = None) -> RDBStorage:
    """An Optuna RDB storage (SQLite or PostgreSQL); the SQLite folder is created if missing."""
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    elif not url.startswith(("postgresql", "mysql")):
        raise ConfigError(f"--storage {url}: not a database URL; fix: use sqlite:///path.db or postgresql://...")
    try:
        return RDBStorage(
            _with_driver(url),
            heartbeat_interval=heartbeat_interval,
            grace_period=None if heartbeat_interval is None else 3 * heartbeat_interval,
            engine_kwargs={"connect_args": {"timeout": 30}} if url.startswith("sqlite") else None,
        )
    except Exception as exc:  # SQLAlchemy raises many kinds: one line for the user
        raise ConfigError(f"--storage {url}: cannot open ({type(exc).__name__}: {exc})".splitlines()[0]) from exc


def make_sampler(name: str, seed: int | None) -> optuna.samplers.BaseSampler:
    """One of the samplers Optuna offers, by short name (``tpe`` by default)."""
    samplers = optuna.samplers
    factories = {
        # constant_liar: with several workers, a trial still running elsewhere counts as a poor one,
        # so two workers do not sample the same neighbourhood (no effect with one worker).
        "tpe": lambda: samplers.TPESampler(
            seed=seed, multivariate=True, group=True, n_startup_trials=6, constant_liar=True
        ),
        "random": lambda: samplers.RandomSampler(seed=seed),
        "gp": lambda: samplers.GPSampler(seed=seed),
        "cmaes": lambda: samplers.CmaEsSampler(seed=seed),
        "qmc": lambda: samplers.QMCSampler(seed=seed),
        "nsga2": lambda: samplers.NSGAIISampler(seed=seed),
        "bruteforce": lambda: samplers.BruteForceSampler(seed=seed),
    }
    if name not in factories:
        raise ConfigError(f"--sampler {name}: unknown; fix: use one of {', '.join(SAMPLERS)}")
    require_sampler(name)  # torch for gp, cmaes for cmaes: before any host time
    return factories[name]()


def create_or_resume(
    storage: RDBStorage,
    study_name: str,
    fingerprint: str,
    *,
    sampler: optuna.samplers.BaseSampler,
    pruner: optuna.pruners.BasePruner | None,
    allow_changed: bool,
    attrs: dict[str, object],
    directions: tuple[str, ...] = ("maximize",),
) -> optuna.Study:
    """Create the study, or resume it when its fingerprint matches (or ``allow_changed``).

    ``directions`` has two entries in multi-objective mode (throughput up, a latency down).
    """
    existing = {s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    study = optuna.create_study(
        storage=storage,
        study_name=study_name,
        sampler=sampler,
        pruner=pruner,
        directions=list(directions),
        load_if_exists=True,
    )
    stored = study.user_attrs.get(FINGERPRINT_ATTR)
    if study_name in existing and stored is not None and stored != fingerprint and not allow_changed:
        raise ConfigError(
            f"study {study_name!r}: the search space or workload changed since it was created "
            f"(fingerprint {stored[:12]} != {fingerprint[:12]}); fix: use --study-name NEW, "
            "another --storage, or --allow-changed to resume anyway"
        )
    study.set_user_attr(FINGERPRINT_ATTR, fingerprint)
    for key, value in attrs.items():
        study.set_user_attr(key, value)
    return study


def load_existing_study(url: str, study_name: str) -> optuna.Study:
    """Load a study for reading; a missing storage or study is a one-line error naming what exists."""
    if url.startswith("sqlite:///") and not Path(url.removeprefix("sqlite:///")).is_file():
        path = Path(url.removeprefix("sqlite:///"))
        found = sorted(p.name for p in path.parent.glob("*.db")) if path.parent.is_dir() else []
        raise ConfigError(
            f"no study database at {path}; existing: {', '.join(found) or 'none'}; "
            "fix: run `tuner optimize` first or pass --storage"
        )
    storage = open_storage(url)
    names = [s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)]
    if study_name not in names:
        raise ConfigError(
            f"no study named {study_name!r} in {url}; existing: {', '.join(names) or 'none'}; "
            "fix: pass --study-name"
        )
    return optuna.load_study(study_name=study_name, storage=storage)
