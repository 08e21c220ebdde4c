"""``tuner optimize --dry-run``: the configurations and command lines a run would start, and its cost.

Nothing touches the host. Configurations come from the same sampler in a throw-away in-memory
study (the baseline first); without measurements a model-based sampler behaves like its random
start-up phase, so this shows the variety of the first trials, not the exact sequence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import optuna
from rich.console import Console

if TYPE_CHECKING:
    from tuner.space import Config
    from tuner.space import SearchSpace


__all__ = ["print_dry_run", "estimate_trial_host_seconds"]

# A real GLM-5 start takes 3-4 minutes before /health answers (calibration.md); a level is
# estimated from its token count at a modest throughput so the estimate errs on the long side.
START_SECONDS = 240.0
ASSUMED_TOKENS_PER_S = 1000.0


def estimate_trial_host_seconds(space: SearchSpace, emulate: bool) -> float:
    """A pessimistic host-time estimate of one trial: start-up plus every level."""
    workload = space.workload_for(emulate)
    tokens = sum(workload.requests_for(c) * workload.output_len for c in workload.levels)
    return START_SECONDS + tokens / ASSUMED_TOKENS_PER_S


def print_dry_run(
    space: SearchSpace,
    trials: int,
    sampler: optuna.samplers.BaseSampler,
    emulate: bool,
    console: Console,
    proposes: str | None = None,
) -> None:
    """Print the baseline and ``trials`` sampled configurations with their command lines.

    ``proposes``: the name of a strategy that chooses trials from what earlier trials measured
    (``guided``); its choices cannot be known before the run, so the dry run says so and shows the
    sampler's draws it falls back to."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if proposes:
        console.print(
            f"{proposes}: after the baseline each trial is chosen from what the trials "
            "before it measured, unknown before the run; below, the sampler's draws it falls back to",
            highlight=False,
        )
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.enqueue_trial(space.params_for_enqueue(space.baseline))
    seen: set[str] = set()
    shown = skipped = 0
    for _ in range(trials * 20):
        if shown >= trials:
            break
        trial = study.ask()
        config = space.suggest(trial)
        is_baseline = trial.number == 0
        violations = [] if is_baseline else space.constraint_violations(config)
        skip = [v.reason for v in violations if v.action == "skip"]
        if skip or config.key() in seen:
            skipped += 1
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            continue
        seen.add(config.key())
        shown += 1
        launch = space.render(config, resolve=False)
        label = "baseline" if is_baseline else f"trial {trial.number}"  # as the run numbers it
        console.print(f"[cyan]{label}[/]: {launch.command_line}", soft_wrap=True, highlight=False)
        for name in _patch_names(space, config):
            state = "on" if name in launch.patches else "off"
            console.print(f"    patch {name}: {state}", highlight=False)
        for v in violations:
            console.print(f"    [yellow]warning[/]: {v.reason}", highlight=False)
        study.tell(trial, 0.0)
    per_trial = estimate_trial_host_seconds(space, emulate)
    estimate = (
        f"{shown} configurations ({skipped} skipped by constraints or as duplicates); "
        f"estimated host time{' (emulated)' if emulate else ''}: {shown * per_trial / 3600:.1f} h "
        f"(about {per_trial / 60:.0f} min a trial, start-up included)"
    )
    if emulate:
        factor = float(space.workload_for(True).time_scale)
        estimate += (
            f"; the emulator runs {factor:g}x faster: about "
            f"{per_trial / factor:.0f} s of wall time a trial, "
            f"{_minutes(shown * per_trial / factor)} in all"
        )
    console.print(estimate)


def _patch_names(space: SearchSpace, config: Config) -> list[str]:
    """The patches of the configuration's active patch dimensions, in declaration order."""
    names = []
    for name, param in space.parameters.items():
        patch = getattr(param, "patch", None)
        if name in config and isinstance(patch, str):
            names.append(patch)
    return names


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
