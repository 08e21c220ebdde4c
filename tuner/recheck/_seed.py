"""``tuner optimize --from-study OLD``: a study for the installed version, seeded from what still
holds of the old one.

Two things seed it, before the loop starts:

1. **The rechecked figures.** When ``tuner recheck`` measured OLD on the installed version
   (``<OLD>-recheck-<version>`` in the same storage), its completed runs are copied into the new
   study as finished trials (levels, re-runs, probe outputs; ``warm_start_from`` names the
   recheck trial): they were measured on this version, so they cost the new study no host run,
   the baseline among them (its probe outputs become the reference).
2. **The old ranking.** The old study's next best stable configurations, by its ranking
   (:meth:`TrialRecord.rank`), that were not rechecked, fit the space and are not broken by the
   installed version, are queued: they run first, before the strategy proposes.

The strategy then searches from the best of these. Seeding happens once: a resumed study that
already holds the copies is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import TrialState, create_trial
from rich.console import Console

from tuner.errors import ConfigError
from tuner.recheck._check import VersionCheck, fit_config, upgrade_check
from tuner.recheck._measure import recheck_study_name
from tuner.study.loop import read_engine_version, server_environment
from tuner.study.record import (
    CONFIG_KEY,
    ENQUEUED,
    PROBE_REFERENCE,
    REPEATS,
    repeats_of,
    WARM_START_FROM,
    read_view,
    stable_candidates,
)
from tuner.study.storage import load_existing_study, open_storage, storage_of
from tuner.study.trial import Target

if TYPE_CHECKING:
    from tuner.patches import PatchManager
    from tuner.space import SearchSpace

__all__ = ["SEED_QUEUED", "Seeded", "UpgradeStart", "seed_from_study"]

SEED_QUEUED = 3  # configurations of the old ranking queued beyond the rechecked ones


class Seeded:
    """What seeding did: ``copied`` rechecked trials, ``queued`` old configurations."""

    def __init__(self, copied: int, queued: int, recheck: str | None) -> None:
        self.copied, self.queued, self.recheck = copied, queued, recheck

    def line(self, old: str) -> str:
        source = (
            f"{self.copied} rechecked run(s) of {self.recheck}"
            if self.recheck
            else f"no recheck of {old} on this version"
        )
        return f"from study {old}: copied {source}; queued {self.queued} of its next best configuration(s)"


def _existing(storage: Any, name: str) -> bool:
    return name in {
        s.study_name for s in optuna.get_all_study_summaries(storage, include_best_trial=False)
    }


def seed_from_study(
    study: optuna.Study,
    space: SearchSpace,
    storage_url: str,
    old_name: str,
    version: str | None,
    broken: frozenset[int] | set[int] = frozenset(),
    queue: int = SEED_QUEUED,
) -> Seeded:
    """Seed ``study`` from the old study ``old_name`` in ``storage_url`` (see the module
    docstring); ``version``: the installed engine's; ``broken``: old trial numbers the installed
    version cannot launch. Raises ConfigError when the old study is not there."""
    if old_name == study.study_name:
        raise ConfigError(
            f"--from-study {old_name}: that is the study being run; fix: give the new study "
            "another name (--study-name NAME)"
        )
    old = load_existing_study(storage_url, old_name)
    recheck_name = recheck_study_name(old_name, version)
    done = read_view(study, space)
    sources = {
        str(r.user_attrs.get(WARM_START_FROM) or "").rpartition("#")[0] for r in done.records
    }
    seeded_before = bool(sources & {old_name, recheck_name})
    if seeded_before:
        return Seeded(0, 0, None)
    known = {r.config_key for r in done.records if r.config_key}
    copied = 0
    rechecked_from: set[str] = set()
    recheck = None
    storage = storage_of(study) or open_storage(storage_url)  # a journal file is a bare path
    if _existing(storage, recheck_name):
        recheck = optuna.load_study(study_name=recheck_name, storage=storage)
        repeats = repeats_of(recheck.user_attrs)
        every = dict(study.user_attrs.get(REPEATS) or {})
        for trial in recheck.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            if trial.user_attrs.get(CONFIG_KEY) in known:
                continue
            rechecked_from.add(str(trial.user_attrs.get(WARM_START_FROM)))
            study.add_trial(
                create_trial(
                    state=TrialState.COMPLETE,
                    values=trial.values,
                    params=trial.params,
                    distributions=trial.distributions,
                    intermediate_values=trial.intermediate_values,
                    user_attrs={
                        **trial.user_attrs,
                        WARM_START_FROM: f"{recheck_name}#{trial.number}",
                    },
                )
            )
            number = study.get_trials(deepcopy=False)[-1].number
            if str(trial.number) in repeats:
                every[str(number)] = repeats[str(trial.number)]
            known.add(str(trial.user_attrs.get(CONFIG_KEY)))
            copied += 1
        if every:
            study.set_user_attr(REPEATS, every)
        if recheck.user_attrs.get(PROBE_REFERENCE) and not study.user_attrs.get(PROBE_REFERENCE):
            study.set_user_attr(PROBE_REFERENCE, recheck.user_attrs[PROBE_REFERENCE])
    old_view = read_view(old, space)
    ranked = sorted(
        stable_candidates(list(old_view.records)),
        key=lambda r: r.rank(old_view.noise.relative),
        reverse=True,
    )
    queued = 0
    for record in ranked:
        if queued >= queue:
            break
        if record.number in broken or f"{old_name}#{record.number}" in rechecked_from:
            continue
        try:
            config = fit_config(space, record.config)
        except ConfigError:
            continue
        if config.key() in known:
            continue
        study.enqueue_trial(
            space.params_for_enqueue(config),
            user_attrs={ENQUEUED: True, WARM_START_FROM: f"{old_name}#{record.number}"},
        )
        known.add(config.key())
        queued += 1
    return Seeded(copied, queued, recheck_name if recheck is not None else None)


@dataclass(frozen=True)
class UpgradeStart:
    """What ``tuner optimize`` does about an engine upgrade, handed to the loop by the command:
    ``check`` says, before any host time, what the installed version breaks of the study's stored
    configurations (and of ``from_study``'s); ``seed`` seeds the study from ``from_study``."""

    storage: str
    from_study: str | None = None

    def check(
        self,
        study: optuna.Study,
        space: SearchSpace,
        target: Target,
        patches: PatchManager,
        console: Console,
    ) -> VersionCheck | None:
        return upgrade_check(study, space, target, patches, console, self.storage, self.from_study)

    def seed(
        self,
        study: optuna.Study,
        space: SearchSpace,
        target: Target,
        check: VersionCheck | None,
        console: Console,
    ) -> None:
        if self.from_study is None:
            return
        version = read_engine_version(target, server_environment(space, target))
        seeded = seed_from_study(
            study,
            space,
            self.storage,
            self.from_study,
            version,
            check.broken if check is not None else set(),
        )
        console.print(seeded.line(self.from_study), highlight=False)
