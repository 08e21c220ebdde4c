"""``tuner optimize`` from start to end: the host claim, preflight, orphans, patches, the loop,
cleanup.

The host is claimed first (``<run_root>/tuner.claim``, :mod:`tuner.study.loop._host_claim`): a second
tuner on the same host stops there with :class:`tuner.host.HostBusy`, before it reverts anything
of the first one's. Everything that touches the host is undone on every exit path: the server of
the current trial is stopped by its session, and every patch is reverted here, also at the start
of the next run after a tuner that was killed; the claim is released last.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import optuna
from rich.console import Console

from tuner.doctor import format_checks
from tuner.errors import TunerError
from tuner.handover import read_gpu_state
from tuner.patches import PatchManager
from tuner.study.loop._confirm import Confirmation
from tuner.space import LEGACY_SET_SUFFIX, SET_SUFFIX
from tuner.study.record import (
    STATED_NOISE,
    TOKENS_PER_JOULE,
    load_summary,
    name_metrics,
    save_study_note,
    winner_lines,
)
from tuner.study.trial import (
    GATE_EXPLORE,
    BaselinePruner,
    FeasibilityCheck,
    Target,
    TrialRunner,
    failing_values,
    request_source,
)
from tuner.study.loop._host_claim import claim_host, release_host
from tuner.study.loop._optimize import OptimizeSummary, local_runs_dir, optimize_study
from tuner.study.storage import create_or_resume, mark_dead_workers, open_storage
from tuner.study.loop._preflight import (
    require_power,
    PATCH_CHECK_PREFIX,
    preflight_checks,
    read_engine_version,
    server_environment,
    unavailable_patches,
)
from tuner.study.loop._progress import ProgressView
from tuner.study.strategies import Strategy, resolve_strategy
from tuner.study.loop._warm_start import warm_start

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = [
    "OptimizeOptions",
    "clear_leftovers",
    "run_optimize",
    "open_study",
    "patch_manager",
    "study_directions",
    "study_pruner",
]


@dataclass(frozen=True)
class OptimizeOptions:
    """The command line of ``tuner optimize`` after parsing."""

    trials: int
    storage: str
    study_name: str
    strategy: str | None = None  # --strategy (None: --sampler, else the default strategy)
    sampler: str | None = None  # the older --sampler
    seed: int | None = None
    emulate: bool = False
    allow_changed: bool = False
    skip_doctor: bool = False
    heartbeat_s: int | None = None
    warm_start: str | None = None
    feasibility: bool = True
    requests: Any = None  # the workload's request source, made by the caller (read once)
    # after an engine upgrade (tuner.recheck.UpgradeStart): what the installed version breaks of
    # the stored configurations, said before any host time; --from-study's seeding
    upgrade: Any = None


def patch_manager(space: SearchSpace, target: Target) -> PatchManager:
    """The patch manager of the target's host, journaled under its run root."""
    return PatchManager(
        target.host,
        python=target.python,
        env=server_environment(space, target),  # where the server finds the package
        journal_dir=f"{target.run_root.rstrip('/')}/patch-journal",
        patches=space.patches.values(),
    )


def study_directions(space: SearchSpace) -> tuple[Literal["minimize", "maximize"], ...]:
    """Maximise throughput; in multi-objective mode also minimise the chosen latency."""
    return ("maximize", "minimize") if space.objective.minimize else ("maximize",)


def study_pruner(space: SearchSpace, emulate: bool = False) -> BaselinePruner | None:
    """The baseline pruner (Optuna allows no pruner in multi-objective studies: the runner then
    applies the same rule itself)."""
    if space.objective.minimize:
        return None
    objective = space.objective
    return BaselinePruner(
        objective.prune_margin,
        metric=objective.metric,
        max_failed_fraction=objective.max_failed_fraction,
        levels=space.workload_for(emulate).levels,
    )


def open_study(
    space: SearchSpace, target: Target, options: OptimizeOptions, strategy: Strategy | None = None
) -> optuna.Study:
    """Create or resume the study; a changed search space is refused before the host is touched."""
    strategy = strategy or resolve_strategy(options.strategy, options.sampler, space, options.seed)
    storage = open_storage(options.storage, heartbeat_interval=options.heartbeat_s)
    return create_or_resume(
        storage,
        options.study_name,
        space.fingerprint(),
        sampler=strategy.sampler(),
        pruner=study_pruner(space, options.emulate),
        directions=study_directions(space),
        allow_changed=options.allow_changed,
        attrs={
            "space_file": str(space.path),
            "engine": space.engine,
            "emulated": target.emulated,
            "time_scale": target.time_scale.factor,
            "host": target.host.name,
            STATED_NOISE: space.objective.noise,
        },
    )


def _preflight(
    space: SearchSpace, target: Target, patches: PatchManager, console: Console
) -> set[str]:
    """Run the checks; stop on a failure, except a patch that does not apply: it is pinned off
    (returned), unless the baseline needs it."""
    checks = preflight_checks(space, target, patches)
    console.print(format_checks(checks))
    unavailable = unavailable_patches(checks)
    failed = [c for c in checks if not c.ok and not c.name.startswith(PATCH_CHECK_PREFIX)]
    if failed:
        raise TunerError(
            f"preflight failed: {failed[0].name}: {failed[0].detail}; fix: {failed[0].fix}"
        )
    if unavailable & set(space.render(space.baseline, resolve=False).patches):
        raise TunerError(
            f"preflight failed: the baseline needs patch(es) {', '.join(sorted(unavailable))} "
            "that do not apply on this host; fix: correct the patch text or the baseline"
        )
    for name in sorted(unavailable):
        console.print(
            f"[yellow]patch {name} does not apply on this host: its dimension is pinned to "
            "'not patched' for this run (configurations needing it are skipped)[/]"
        )
    return unavailable


def clear_leftovers(patches: PatchManager, target: Target, console: Console) -> None:
    """Revert the patches and stop the servers an earlier run of the tuner left on the host (it
    was killed): a run starts from the host as the user had it."""
    restored = patches.revert_all()
    if restored:
        console.print(f"restored {len(restored)} patched file(s) left by an earlier run")
    for orphan in target.host.find_orphans():
        console.print(f"stopping a server left by an earlier run (PID {orphan.pid})")
        target.host.stop_server(orphan, port=orphan.port, env=target.env)


def run_optimize(
    space: SearchSpace, target: Target, options: OptimizeOptions, console: Console
) -> OptimizeSummary:
    """Run the study on the target (see the module docstring)."""
    strategy = resolve_strategy(options.strategy, options.sampler, space, options.seed)
    space.render(space.baseline, local=target.local)  # an unset ${NAME}: exit 2, nothing made yet
    requests = options.requests or request_source(space.workload_for(options.emulate), space.path)
    if requests is not None:
        console.print(f"traffic: {requests.describe()}", highlight=False)
    study = open_study(space, target, options, strategy)
    name_metrics(study, space.objective)  # the dashboard's axes name the objective
    target.emulator_seed = options.seed  # a seeded emulated study draws the same noise again
    claim = claim_host(target, options.study_name, console)  # HostBusy: nothing touched
    patches = patch_manager(space, target)
    progress = ProgressView(console, target.time_scale)
    progress.baseline = dict(space.baseline)
    progress.goodput = space.objective.metric == "goodput"
    progress.tokens_per_joule = space.objective.metric == TOKENS_PER_JOULE
    try:
        clear_leftovers(patches, target, console)
        died = mark_dead_workers(study)
        if died:
            console.print(f"{died} trial(s) of a killed tuner marked FAIL (worker-died)")
        check = (
            options.upgrade.check(study, space, target, patches, console)
            if options.upgrade
            else None
        )
        unavailable = set() if options.skip_doctor else _preflight(space, target, patches, console)
        target.gpu_idle = read_gpu_state(target.host, target.env)  # each start waits for it
        require_power(space, target.gpu_idle)  # tokens_per_joule on a host without nvidia-smi
        if options.upgrade is not None:
            options.upgrade.seed(study, space, target, check, console)
        if options.warm_start:
            queued = warm_start(study, space, options.warm_start)
            console.print(
                f"warm start: queued {len(queued)} configuration(s) of {options.warm_start}"
            )
        runner = TrialRunner(
            space=space,
            target=target,
            patches=patches,
            study=study,
            local_runs_dir=local_runs_dir(options.storage, options.study_name),
            emulate=options.emulate,
            engine_version=read_engine_version(target, server_environment(space, target)),
            requests=requests,
        )
        feasibility = (
            FeasibilityCheck.from_study(study, space, explore=GATE_EXPLORE, seed=options.seed)
            if options.feasibility
            else None
        )
        summary = optimize_study(
            study,
            space,
            runner,
            options.trials,
            progress,
            unavailable,
            feasibility=feasibility,
            strategy=strategy,
            confirm=Confirmation(study, space, host=target.host.name),
        )
        for line in failing_values(study):
            console.print(f"[yellow]keeps failing[/]: {line}", highlight=False)
        for line in load_summary(study, space):
            console.print(line, highlight=False)
        winner = winner_lines(study, progress.value_text(1.0).split(" ", 1)[1])
        if winner:  # the winner and its re-measures, in the dashboard; what "NAME is set" means
            helpers = {
                name.removesuffix(suffix)
                for trial in study.get_trials(deepcopy=False)
                for name in trial.params
                for suffix in (SET_SUFFIX, LEGACY_SET_SUFFIX)
                if name.endswith(suffix)
            }
            save_study_note(study, winner, sorted(helpers))
        return summary
    finally:
        progress.close()
        try:
            patches.revert_all()
        finally:
            try:
                target.host.cleanup_run_dirs()
            finally:
                release_host(claim, console)
