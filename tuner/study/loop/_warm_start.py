"""Warm start: queue the best stable configurations of an earlier study in a new one.

The seeds moved from the K2-Thinking run to GLM-5 on the same hardware: what won there is a good
first guess here. :func:`warm_start` reads every study in another storage (or the one named),
takes its stable COMPLETE trials best first, and fits each configuration to the new space:
parameters the new space lacks are dropped, missing ones are filled from the new baseline, and a
value outside the new ranges or choices skips the configuration (checked by
``space.config(values, drop_inactive=True)``, as for the baseline). The ones that fit are
enqueued: they run right after the baseline, before any sampled configuration, and are never
skipped by the feasibility gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.errors import ConfigError
from tuner.space import Config
from tuner.study.record import CONFIG, CONFIG_KEY, ENQUEUED, STABLE, VALIDATION, WARM_START_FROM
from tuner.study.loop._choosing import ensure_baseline_queued
from tuner.study.storage import open_storage, storage_file

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = ["Candidate", "storage_url", "warm_start", "warm_start_candidates"]


@dataclass(frozen=True)
class Candidate:
    """A stable trial of the earlier study and what became of it in the new space.

    Attributes:
        source: ``<study>#<trial number>``.
        value: its objective value (output tok/s) there.
        config: the configuration fitted to the new space, or None when it does not fit.
        reason: why it does not fit (the space's one-line message), or None.
    """

    source: str
    value: float
    config: Config | None
    reason: str | None = None


def storage_url(path_or_url: str) -> str:
    """A storage URL: ``OTHER.db`` (a path: a journal file, or SQLite by its header) stays an
    absolute path, which :func:`open_storage` opens by its content."""
    if "://" in path_or_url:
        return path_or_url
    return str(Path(path_or_url).expanduser().resolve())


def _studies(url: str, study_name: str | None) -> list[optuna.Study]:
    path = storage_file(url)
    if path is not None and not path.is_file():
        raise ConfigError(
            f"--warm-start {path}: no such study database; "
            "fix: give the .db file of an earlier study (studies/<name>.db)"
        )
    storage = open_storage(url)
    names = [
        s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)
    ]
    if study_name is not None and study_name not in names:
        raise ConfigError(
            f"--warm-start {url}: no study named {study_name!r}; existing: "
            f"{', '.join(names) or 'none'}; fix: name one of them"
        )
    chosen = [study_name] if study_name is not None else names
    return [optuna.load_study(study_name=name, storage=storage) for name in chosen]


def _stable(trial: FrozenTrial) -> bool:
    return (
        trial.state == TrialState.COMPLETE
        and bool(trial.user_attrs.get(STABLE))
        and isinstance(trial.user_attrs.get(CONFIG), dict)
        and trial.user_attrs.get(VALIDATION, {}).get("stable", True)
    )


def _fit(space: SearchSpace, values: dict[str, Any]) -> Config:
    kept = {name: value for name, value in values.items() if name in space.parameters}
    return space.config({**dict(space.baseline), **kept}, drop_inactive=True)


def warm_start_candidates(
    space: SearchSpace, other_storage_url: str, study_name: str | None = None
) -> list[Candidate]:
    """Every stable trial of the earlier storage, best first, fitted to ``space`` where it fits.

    Raises:
        ConfigError: the storage is missing, the named study is not in it, or it holds no
            stable trial (the message names the studies that exist).
    """
    url = storage_url(other_storage_url)
    studies = _studies(url, study_name)
    found = [
        (trial.values[0], study.study_name, trial)
        for study in studies
        for trial in study.get_trials(deepcopy=False)
        if _stable(trial)
    ]
    if not found:
        shown = ", ".join(f"{s.study_name} ({len(s.trials)} trials)" for s in studies) or "none"
        raise ConfigError(
            f"--warm-start {other_storage_url}: no stable completed trial to start from; "
            f"studies there: {shown}; fix: warm-start from a study that has run"
        )
    candidates = []
    for value, name, trial in sorted(found, key=lambda f: (-f[0], f[1], f[2].number)):
        source = f"{name}#{trial.number}"
        try:
            candidates.append(Candidate(source, value, _fit(space, trial.user_attrs[CONFIG])))
        except ConfigError as error:
            candidates.append(Candidate(source, value, None, str(error)))
    return candidates


def _known_keys(study: optuna.Study, space: SearchSpace) -> set[str]:
    """Configurations the new study has run or queued (the baseline included)."""
    keys = {space.baseline.key()}
    for trial in study.get_trials(deepcopy=False):
        if CONFIG_KEY in trial.user_attrs:
            keys.add(trial.user_attrs[CONFIG_KEY])
        elif trial.state == TrialState.WAITING:
            try:
                queued = trial.params or trial.system_attrs.get("fixed_params", {})
                keys.add(space.config_from_params(queued).key())
            except ConfigError:
                continue
    return keys


def warm_start(
    study: optuna.Study,
    space: SearchSpace,
    other_storage_url: str,
    top: int = 5,
    study_name: str | None = None,
) -> list[Config]:
    """Enqueue up to ``top`` of the earlier study's best stable configurations that fit.

    The baseline is queued first if it is not yet (it always runs first); configurations the
    new study already ran or queued are not queued again. Each queued trial carries
    ``enqueued: true`` and ``warm_start_from``.

    Args:
        study: the new study.
        space: the new search space.
        other_storage_url: the earlier study's storage (a URL, or the path of a ``.db`` file).
        top: how many configurations to queue at most.
        study_name: read only this study of that storage (default: every study in it).

    Returns:
        The configurations queued, best first.

    Raises:
        ConfigError: see :func:`warm_start_candidates`.
    """
    candidates = warm_start_candidates(space, other_storage_url, study_name)
    ensure_baseline_queued(study, space)  # the baseline still runs first
    known = _known_keys(study, space)
    queued: list[Config] = []
    for candidate in candidates:
        if len(queued) >= top:
            break
        if candidate.config is None or candidate.config.key() in known:
            continue
        study.enqueue_trial(
            space.params_for_enqueue(candidate.config),
            user_attrs={ENQUEUED: True, WARM_START_FROM: candidate.source},
        )
        known.add(candidate.config.key())
        queued.append(candidate.config)
    return queued
