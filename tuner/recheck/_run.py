"""``tuner recheck`` from start to end: read the study, claim the host, say what the installed
version breaks, run the subjects interleaved, print then against now and the verdict.

Everything before the first server start reads only: a study with nothing to recheck stops with
exit 2 before the host is touched, and the version check (:mod:`tuner.recheck._check`) reads
``--help`` and the patches' files. As ``tuner optimize`` does, the host is claimed first, patches
an earlier run left are reverted, and on every exit path the server is stopped, every patch
reverted and the claim released.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import optuna
from rich.console import Console

from tuner.errors import ConfigError, TunerError
from tuner.handover import read_gpu_state
from tuner.recheck._check import VersionCheck, check_version, installed_interface
from tuner.recheck._measure import RecheckRuns, first_runs, recheck_study_name, source_of
from tuner.recheck._plan import Subject, choose_subjects
from tuner.recheck._verdict import Commands, Verdict, level_rows, verdict
from tuner.study.loop import (
    clear_leftovers,
    PATCH_CHECK_PREFIX,
    claim_host,
    local_runs_dir,
    patch_manager,
    preflight_checks,
    release_host,
)
from tuner.study.record import (
    EMULATED,
    ENGINE,
    HOST,
    SPACE_FILE,
    STATED_NOISE,
    TIME_SCALE,
    WARM_START_FROM,
    StudyView,
    TrialRecord,
    read_view,
)
from tuner.study.storage import create_or_resume, load_existing_study, open_storage
from tuner.study.trial import Target, TrialRunner, request_source

if TYPE_CHECKING:
    from tuner.patches import PatchManager
    from tuner.space import SearchSpace

__all__ = ["RecheckOptions", "RecheckPlan", "RecheckResult", "plan_recheck", "run_recheck"]

# Preflight checks a recheck reports through the version check instead of stopping on: an
# upgrade is expected to change the version, and what it breaks is the recheck's finding.
_REPORTED_NOT_STOPPED = ("engine version", "flags known")


@dataclass(frozen=True)
class RecheckOptions:
    """The command line of ``tuner recheck`` after parsing."""

    storage: str
    study_name: str
    top: int = 2
    runs: int = 2
    emulate: bool = False
    skip_doctor: bool = False
    shown_options: str = ""  # the storage/emulate options as typed, for the next command


@dataclass(frozen=True)
class RecheckResult:
    """What the recheck found: the version check, each subject's recheck record and the verdict."""

    check: VersionCheck
    subjects: tuple[Subject, ...]
    now: dict[int, TrialRecord | None]
    verdict: Verdict
    study: str  # the recheck study's name
    runs_made: int


def _open_recheck(
    space: SearchSpace, target: Target, options: RecheckOptions, version: str | None
) -> optuna.Study:
    return create_or_resume(
        open_storage(options.storage),
        recheck_study_name(options.study_name, version),
        space.fingerprint(),
        sampler=optuna.samplers.RandomSampler(),
        pruner=optuna.pruners.NopPruner(),
        allow_changed=True,
        attrs={
            SPACE_FILE: str(space.path),
            ENGINE: space.engine,
            EMULATED: target.emulated,
            TIME_SCALE: target.time_scale.factor,
            HOST: target.host.name,
            STATED_NOISE: space.objective.noise,
            WARM_START_FROM: options.study_name,
        },
    )


def _preflight(
    space: SearchSpace, target: Target, patches: PatchManager, console: Console
) -> None:
    from tuner.doctor import format_checks

    checks = preflight_checks(space, target, patches)
    console.print(format_checks(checks))
    stopping = [
        c
        for c in checks
        if not c.ok
        and c.name not in _REPORTED_NOT_STOPPED
        and not c.name.startswith(PATCH_CHECK_PREFIX)
    ]
    if stopping:
        raise TunerError(
            f"preflight failed: {stopping[0].name}: {stopping[0].detail}; fix: {stopping[0].fix}"
        )


@dataclass(frozen=True)
class RecheckPlan:
    """What a recheck reads before it touches the host.

    ``view``: the rechecked study as stored (its records, noise and label: the figures of then);
    ``subjects``: what is measured again: the baseline, the winner and the next ``top - 1``
    distinct stable configurations, in that order.
    """

    view: StudyView
    subjects: list[Subject]


def plan_recheck(space: SearchSpace, options: RecheckOptions) -> RecheckPlan:
    """The study's view and what the recheck measures; a bad input raises ConfigError (exit 2)
    before anything touches the host."""
    if space.objective.minimize or space.objective.metric == "goodput":
        raise ConfigError(
            f"{space.path}: objective: recheck compares one figure per configuration; "
            "fix: recheck a study with a single throughput objective"
        )
    view = read_view(load_existing_study(options.storage, options.study_name), space)
    return RecheckPlan(view, choose_subjects(view, options.top))


def run_recheck(
    space: SearchSpace, target: Target, options: RecheckOptions, console: Console
) -> RecheckResult:
    """Recheck the study's winner on the installed engine (see the module docstring)."""
    plan = plan_recheck(space, options)  # nothing to recheck: exit 2, host untouched
    requests = request_source(space.workload_for(options.emulate), space.path)
    claim = claim_host(target, options.study_name, console)
    patches = patch_manager(space, target)
    try:
        clear_leftovers(patches, target, console)
        if not options.skip_doctor:
            _preflight(space, target, patches, console)
        interface = installed_interface(space, target)
        check = check_version(space, target, patches, plan.view.records, interface)
        for line in check.lines(options.study_name) or [
            f"engine: {interface.version} installed, as the study ran"
        ]:
            console.print(line, highlight=False)
        blocked = {number for b in check.breaks for number in b.trials}
        target.gpu_idle = read_gpu_state(target.host, target.env)
        recheck = _open_recheck(space, target, options, interface.version)
        runner = TrialRunner(
            space=space,
            target=target,
            patches=patches,
            study=recheck,
            local_runs_dir=local_runs_dir(options.storage, recheck.study_name),
            emulate=options.emulate,
            engine_version=interface.version,
            requests=requests,
        )
        runs = RecheckRuns(
            recheck,
            options.study_name,
            space,
            runner,
            say=lambda line: console.print(line, highlight=False),
        )
        made = runs.run(
            plan.subjects, options.runs, blocked & {s.record.number for s in plan.subjects}
        )
    finally:
        try:
            patches.revert_all()
        finally:
            try:
                target.host.cleanup_run_dirs()
            finally:
                release_host(claim, console)
    return _report(space, plan, recheck, check, options, made, console)


def _report(
    space: SearchSpace,
    plan: RecheckPlan,
    recheck: optuna.Study,
    check: VersionCheck,
    options: RecheckOptions,
    made: int,
    console: Console,
) -> RecheckResult:
    """Print then against now for each subject, then the verdict."""
    view, subjects = plan.view, plan.subjects
    now_view = read_view(recheck, space)
    done = first_runs(recheck, space)
    now = {s.record.number: done.get(source_of(options.study_name, s.record)) for s in subjects}
    label = view.label or now_view.label
    unit = ("tok/J" if space.objective.metric == "tokens_per_joule" else "tok/s") + label
    noise = now_view.noise.relative
    console.print(
        f"recheck of {options.study_name} on {check.installed} ({made} run(s) now; runs in "
        f"{recheck.study_name}; noise {noise:.1%}: {now_view.noise.source})",
        highlight=False,
    )
    for subject in subjects:
        console.print(f"  {subject.label}", highlight=False)
        for row in level_rows(
            subject,
            now.get(subject.record.number),
            space.objective.metric,
            view.noise.relative,
            noise,
            unit,
            check.breaks,
        ):
            console.print(row, highlight=False)
    commands = Commands(
        str(space.path), options.study_name, recheck.study_name, options.shown_options
    )
    found = verdict(subjects, now, check.breaks, noise, commands, unit)
    for line in found.lines:
        console.print(line, highlight=False)
    return RecheckResult(check, tuple(subjects), now, found, recheck.study_name, made)
