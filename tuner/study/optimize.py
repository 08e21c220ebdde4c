"""The optimize loop: baseline first, then sampled configurations, until the budget is spent.

``--trials N`` counts configurations actually run on the host. A configuration excluded by a
constraint is recorded as PRUNED with its reason, and one identical to an earlier trial reuses
that trial's result; neither costs host time nor budget. A FAIL keeps its reason class and log
excerpt. Ctrl-C (or a killed tuner) loses no completed trial: the interrupted trial is recorded as
FAIL (``interrupted``, or ``worker-died`` when found on the next start) and may run again.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.storages._heartbeat import get_heartbeat_thread
from optuna.trial import TrialState

from tuner.errors import ServerFailure, TunerError
from tuner.study import attrs
from tuner.study.enqueue import ENQUEUED_ATTR
from tuner.study.feasibility import FEASIBILITY_PRUNER, FeasibilityCheck
from tuner.study.objective import TrialRunner
from tuner.study.probe_reference import require_probe_reference, wait_for_probe_reference
from tuner.study.progress import ProgressView
from tuner.study.storage import fail_stale_trials, retry_later, storage_file
from tuner.study.pruner import BASELINE_ATTR

__all__ = ["optimize_study", "OptimizeSummary", "mark_dead_workers", "ensure_baseline_queued", "MAX_IDLE_ASKS"]

# How many configurations in a row may be skipped or reused before the space counts as exhausted.
MAX_IDLE_ASKS = 30


@dataclass
class OptimizeSummary:
    """What one ``tuner optimize`` did."""

    ran: int = 0
    skipped: int = 0
    reused: int = 0
    states: dict[str, int] = field(default_factory=dict)
    exhausted: bool = False
    patience_stop: bool = False


class Patience:
    """Stops the run when ``trials`` host-run trials in a row improved the best by < X%."""

    def __init__(self, setting: Any | None) -> None:
        self.setting = setting
        self.best: float | None = None
        self.without_improvement = 0

    @property
    def exhausted(self) -> bool:
        return self.setting is not None and self.without_improvement >= self.setting.trials

    def record(self, value: float | None) -> None:
        if self.setting is None:
            return
        if value is not None and (
            self.best is None or value > self.best * (1.0 + self.setting.min_improvement)
        ):
            self.best = value
            self.without_improvement = 0
        else:
            self.without_improvement += 1
            if value is not None and (self.best is None or value > self.best):
                self.best = value


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def mark_dead_workers(study: optuna.Study) -> int:
    """Fail RUNNING trials left by a tuner on this machine that is no longer alive (and queue
    their configurations again: the worker died, not the configuration)."""
    me = socket.gethostname()
    marked = 0
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = str(trial.user_attrs.get("worker", ""))
        machine, _, pid = worker.rpartition(":")
        if machine != me or not pid.isdigit() or _pid_alive(int(pid)):
            continue
        study._storage.set_trial_user_attr(trial._trial_id, "failure_reason", "worker-died")
        study._storage.set_trial_user_attr(
            trial._trial_id, "failure_detail", "the tuner running this trial was killed"
        )
        study._storage.set_trial_state_values(trial._trial_id, TrialState.FAIL)
        retry_later(study, trial)
        marked += 1
    return marked


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def ensure_baseline_queued(study: optuna.Study, space: Any) -> None:
    for trial in study.get_trials(deepcopy=False):
        if trial.user_attrs.get(BASELINE_ATTR) and trial.state in (
            TrialState.COMPLETE,
            TrialState.WAITING,
            TrialState.RUNNING,  # on another worker (a dead worker's is failed and queued again)
        ):
            return
        if trial.user_attrs.get(BASELINE_ATTR) and trial.state == TrialState.FAIL:
            if attrs.reusable_failure(trial.user_attrs.get("failure_reason")):
                return
    study.enqueue_trial(space.params_for_enqueue(space.baseline), user_attrs={BASELINE_ATTR: True})


def _finished_by_key(study: optuna.Study) -> dict[str, optuna.trial.FrozenTrial]:
    """Earlier results that a new identical configuration reuses, by configuration key."""
    found: dict[str, optuna.trial.FrozenTrial] = {}
    for trial in study.get_trials(deepcopy=False):
        key = trial.user_attrs.get("config_key")
        if key is None or trial.user_attrs.get("reused_from") is not None:
            continue
        if trial.state == TrialState.COMPLETE or (
            trial.state == TrialState.PRUNED and trial.user_attrs.get("pruned_by") == "baseline"
        ):
            found[key] = trial
        elif trial.state == TrialState.FAIL and attrs.reusable_failure(
            trial.user_attrs.get("failure_reason")
        ):
            found[key] = trial
    return found


def _reuse(study: optuna.Study, trial: optuna.Trial, earlier: optuna.trial.FrozenTrial) -> None:
    for key in ("levels", "failure_reason", "failure_detail", "pruned_reason", "pruned_by", "stable"):
        if key in earlier.user_attrs:
            attrs.set(trial, key, earlier.user_attrs[key])
    for level in earlier.user_attrs.get("levels", []):
        attrs.set_level_figures(trial, level)
    attrs.set(trial, "reused_from", earlier.number)
    if len(study.directions) == 1:
        for step, value in earlier.intermediate_values.items():
            trial.report(value, step)
    if earlier.state == TrialState.COMPLETE:
        study.tell(trial, earlier.values)
    else:
        study.tell(trial, state=earlier.state)


def optimize_study(
    study: optuna.Study,
    space: Any,
    runner: TrialRunner,
    n_trials: int,
    progress: ProgressView,
    unavailable_patches: set[str] = frozenset(),
    feasibility: FeasibilityCheck | None = None,
) -> OptimizeSummary:
    """Run up to ``n_trials`` configurations on the host (the baseline first, if not yet run).

    Configurations needing one of ``unavailable_patches`` (whose text the host's file lacks) are
    skipped like a constraint: that dimension is pinned to "not patched" for this run. With
    ``feasibility``, a sampled configuration too much like failed ones is recorded PRUNED
    (``pruned_by: feasibility``) without running; the baseline and enqueued ones always run.
    """
    summary = OptimizeSummary()
    ensure_baseline_queued(study, space)
    finished = _finished_by_key(study)
    patience = Patience(space.objective.patience)
    idle = 0
    progress.run_started(n_trials, study)
    while summary.ran < n_trials and not patience.exhausted:
        fail_stale_trials(study)  # a dead worker's trial: FAIL worker-died, queued again
        wait_for_probe_reference(study, space, say=progress.console.print)
        require_probe_reference(study, space)  # a failed baseline: stop, nothing can be checked
        finished.update(_finished_by_key(study))  # other workers' results too
        trial = study.ask()
        try:
            is_baseline = bool(trial.user_attrs.get(BASELINE_ATTR))
            config = space.suggest(trial)
            key = config.key()
            attrs.set(trial, "config", dict(config))
            attrs.set(trial, "config_key", key)
            attrs.set(trial, "worker", worker_id())
            attrs.set(trial, "host", runner.target.host.name)
            attrs.set(trial, "emulated", runner.target.emulated)
            violations = [] if is_baseline else space.constraint_violations(config)
            skips = [v.reason for v in violations if v.action == "skip"]
            if not is_baseline and unavailable_patches:
                needed = unavailable_patches & set(space.render(config, resolve=False).patches)
                skips += [f"patch {name} does not apply on this host" for name in sorted(needed)]
            if skips:
                attrs.set(trial, "pruned_reason", "constraint: " + "; ".join(skips))
                attrs.set(trial, "pruned_by", "constraint")
                study.tell(trial, state=TrialState.PRUNED)
                summary.skipped += 1
                progress.trial_skipped(trial.number, "constraint: " + "; ".join(skips))
            elif (unsafe := _feasibility_skip(feasibility, trial, config, finished.get(key))):
                attrs.set(trial, "pruned_reason", unsafe)
                attrs.set(trial, "pruned_by", FEASIBILITY_PRUNER)
                study.tell(trial, state=TrialState.PRUNED)
                summary.skipped += 1
                progress.trial_skipped(trial.number, unsafe)
            elif key in finished:
                _reuse(study, trial, finished[key])
                summary.reused += 1
                progress.trial_skipped(trial.number, f"same as trial {finished[key].number}: reused")
            else:
                idle = -1
                summary.ran += 1
                with get_heartbeat_thread(trial._trial_id, study._storage):
                    state = _run_one(study, space, runner, trial, config, is_baseline, summary, progress)
                summary.states[state.name] = summary.states.get(state.name, 0) + 1
                frozen = study._storage.get_trial(trial._trial_id)
                if feasibility is not None:
                    feasibility.record_trial(frozen)
                patience.record(frozen.values[0] if frozen.state == TrialState.COMPLETE else None)
                if frozen.state == TrialState.COMPLETE or attrs.reusable_failure(
                    frozen.user_attrs.get("failure_reason")
                ) or frozen.user_attrs.get("pruned_by") == "baseline":
                    finished[key] = frozen
        except KeyboardInterrupt:
            _fail_if_running(study, trial, "interrupted", "Ctrl-C: this configuration may run again")
            raise
        idle += 1
        if idle >= MAX_IDLE_ASKS:
            summary.exhausted = True
            break
    summary.patience_stop = patience.exhausted
    progress.run_finished(summary)
    return summary


def _fail_if_running(study: optuna.Study, trial: optuna.Trial, reason: str, detail: str) -> None:
    """Record an interrupted trial as FAIL (unless it already finished), so none stays RUNNING."""
    if study._storage.get_trial(trial._trial_id).state != TrialState.RUNNING:
        return
    attrs.set(trial, "failure_reason", reason)
    attrs.set(trial, "failure_detail", detail)
    study.tell(trial, state=TrialState.FAIL)


def _feasibility_skip(
    feasibility: FeasibilityCheck | None,
    trial: optuna.Trial,
    config: Any,
    earlier: optuna.trial.FrozenTrial | None,
) -> str | None:
    """The gate's reason to skip a sampled configuration (never the baseline, an enqueued one, a
    dead worker's retried one, or one that ran clean before)."""
    if feasibility is None or any(
        trial.user_attrs.get(key) is not None for key in (BASELINE_ATTR, ENQUEUED_ATTR, "retry_of")
    ):
        return None
    if earlier is not None and earlier.state != TrialState.FAIL:
        return None
    return feasibility.skip_reason(config)


def _run_one(
    study: optuna.Study,
    space: Any,
    runner: TrialRunner,
    trial: optuna.Trial,
    config: Any,
    is_baseline: bool,
    summary: OptimizeSummary,
    progress: ProgressView,
) -> TrialState:
    launch = space.render(
        config, command=runner.target.command, port=runner.target.port, local=runner.target.local
    )
    attrs.set(trial, "command_line", launch.command_line)
    attrs.set(trial, "env", launch.masked_env())
    attrs.set(trial, "patches", sorted(launch.patches))
    if launch.warnings:
        attrs.set(trial, "warnings", list(launch.warnings))
    progress.trial_started(trial.number, summary.ran, config, is_baseline)
    runner.on_phase = progress.phase
    runner.on_level = progress.level_done
    started = time.monotonic()
    try:
        value = runner.run(trial, config, launch)
    except optuna.TrialPruned as pruned:
        attrs.set(trial, "pruned_reason", str(pruned))
        attrs.set(trial, "pruned_by", "baseline")
        study.tell(trial, state=TrialState.PRUNED)
        progress.trial_finished(trial.number, "PRUNED", None, str(pruned), time.monotonic() - started)
        return TrialState.PRUNED
    except ServerFailure as failure:
        attrs.set(trial, "failure_reason", failure.reason)
        attrs.set(trial, "failure_detail", failure.detail)
        attrs.set(trial, "failure_excerpt", failure.excerpt)
        attrs.set(trial, "failure_noticed_at", failure.noticed_at)
        study.tell(trial, state=TrialState.FAIL)
        progress.trial_finished(trial.number, "FAIL", None, str(failure), time.monotonic() - started)
        return TrialState.FAIL
    except TunerError as error:  # host trouble: the configuration is not to blame
        attrs.set(trial, "failure_reason", "host-error")
        attrs.set(trial, "failure_detail", str(error))
        study.tell(trial, state=TrialState.FAIL)
        progress.trial_finished(trial.number, "FAIL", None, f"host-error: {error}", time.monotonic() - started)
        return TrialState.FAIL
    study.tell(trial, value)
    progress.trial_finished(trial.number, "COMPLETE", value[0], None, time.monotonic() - started)
    return TrialState.COMPLETE


def local_runs_dir(storage_url: str, study_name: str) -> Path:
    """Where server logs of this study are copied on this machine."""
    path = storage_file(storage_url)
    base = path.parent if path is not None else Path("studies")
    return base / "runs" / study_name
