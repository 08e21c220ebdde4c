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

from tuner.errors import ConfigError, ServerFailure, TunerError
from tuner.scrub import Scrubber
from tuner.study import attrs
from tuner.study.attrs import Outcome
from tuner.study.confirm import Confirmation
from tuner.study.feasibility import FeasibilityCheck, GateDecision
from tuner.study.goodput import require_baseline_goodput
from tuner.study.objective import TrialRunner
from tuner.study.probe_reference import require_probe_reference, wait_for_probe_reference
from tuner.study.progress import ProgressView
from tuner.study.storage import fail_stale_trials, retry_later, storage_file
from tuner.study.strategies._samplers import StudySampler
from tuner.study.strategies._base import Strategy
from tuner.study.view import StudyView, TrialRecord, read_view

__all__ = ["optimize_study", "OptimizeSummary", "mark_dead_workers", "ensure_baseline_queued", "MAX_IDLE_ASKS"]

# How many configurations in a row may be skipped or reused before the space counts as exhausted.
MAX_IDLE_ASKS = 30


@dataclass
class OptimizeSummary:
    """What one ``tuner optimize`` did."""

    ran: int = 0
    skipped: int = 0  # by a constraint (or a patch that does not apply here)
    skipped_unsafe: int = 0  # by the feasibility gate: like configurations that failed
    reused: int = 0
    states: dict[str, int] = field(default_factory=dict)
    exhausted: bool = False
    patience_stop: bool = False
    remeasured: int = 0  # re-runs of a close best and runner-up (tuner.study.confirm), in the budget


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
        worker = str(trial.user_attrs.get(attrs.WORKER, ""))
        machine, _, pid = worker.rpartition(":")
        if machine != me or not pid.isdigit() or _pid_alive(int(pid)):
            continue
        study._storage.set_trial_user_attr(trial._trial_id, attrs.FAILURE_REASON, "worker-died")
        study._storage.set_trial_user_attr(
            trial._trial_id, attrs.FAILURE_DETAIL, "the tuner running this trial was killed"
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
        if not trial.user_attrs.get(attrs.IS_BASELINE):
            continue
        outcome = attrs.outcome_of(trial)
        if outcome in (Outcome.COMPLETE, Outcome.WAITING, Outcome.FAILED, Outcome.REUSED):
            return
        if outcome == Outcome.RUNNING:  # on another worker (a dead worker's is failed and queued again)
            return
    study.enqueue_trial(space.params_for_enqueue(space.baseline), user_attrs={attrs.IS_BASELINE: True})


def _reuse(study: optuna.Study, trial: optuna.Trial, earlier: optuna.trial.FrozenTrial) -> None:
    for key in attrs.REUSED_ATTRS:
        if key in earlier.user_attrs:
            attrs.set(trial, key, earlier.user_attrs[key])
    for level in earlier.user_attrs.get(attrs.LEVELS, []):
        attrs.set_level_figures(trial, level)
    attrs.set(trial, attrs.REUSED_FROM, earlier.number)
    if len(study.directions) == 1:
        for step, value in earlier.intermediate_values.items():
            trial.report(value, step)
    if earlier.state == TrialState.COMPLETE:
        study.tell(trial, earlier.values)
    else:
        study.tell(trial, state=earlier.state)


def why_chosen(trial: optuna.Trial, strategy: Strategy) -> tuple[str, bool]:
    """The trial's ``chosen_by`` and whether the sampler drew it (only those meet the gate)."""
    ua = trial.user_attrs
    if ua.get(attrs.CHOSEN_BY):
        return str(ua[attrs.CHOSEN_BY]), False
    if ua.get(attrs.IS_BASELINE):
        return "baseline", False
    if ua.get(attrs.RETRY_OF) is not None:
        return f"retry of trial {ua[attrs.RETRY_OF]} (its worker died)", False
    if ua.get(attrs.WARM_START_FROM):
        return f"warm start: {ua[attrs.WARM_START_FROM]}", False
    if ua.get(attrs.ENQUEUED):
        return "enqueued by hand", False
    return strategy.sampled_reason, True


def _queue_proposal(study: optuna.Study, space: Any, strategy: Strategy, view: StudyView, progress: ProgressView) -> None:
    """Queue the strategy's proposal, if it makes one and nothing else is queued."""
    if any(r.outcome == Outcome.WAITING for r in view.records):
        return
    proposal = strategy.propose(view)
    if proposal is None:
        return
    try:
        config = space.config(proposal.config, drop_inactive=True)
    except ConfigError as error:  # a strategy's mistake must not stop the study: the sampler draws
        progress.console.print(f"[yellow]strategy {strategy.name}: proposal ignored[/]: {error}", highlight=False)
        return
    move = {attrs.MOVE: proposal.move.to_dict()} if proposal.move is not None else {}
    study.enqueue_trial(space.params_for_enqueue(config), user_attrs={attrs.CHOSEN_BY: proposal.reason, **move})


def optimize_study(
    study: optuna.Study,
    space: Any,
    runner: TrialRunner,
    n_trials: int,
    progress: ProgressView,
    unavailable_patches: set[str] = frozenset(),
    feasibility: FeasibilityCheck | None = None,
    strategy: Strategy | None = None,
    confirm: Confirmation | None = None,
) -> OptimizeSummary:
    """Run up to ``n_trials`` configurations on the host (the baseline first, if not yet run).

    Each iteration reads the study once (:func:`read_view`); the ``strategy`` may propose the next
    configuration from that view, else the study's sampler draws one (without a strategy, the
    study's sampler alone). Every trial stores why it was chosen (``chosen_by``).
    Configurations needing one of ``unavailable_patches`` (whose text the host's file lacks) are
    skipped like a constraint: that dimension is pinned to "not patched" for this run. With
    ``feasibility``, a sampled configuration too much like failed ones is recorded PRUNED
    (``pruned_by: feasibility``) without running; the baseline and queued ones always run.
    With ``confirm``, the end of the budget re-measures a close best and runner-up.
    """
    strategy = strategy or StudySampler(study)
    summary = OptimizeSummary()
    ensure_baseline_queued(study, space)
    patience = Patience(space.objective.patience)
    idle = 0
    progress.run_started(n_trials, study)
    while summary.ran < n_trials and not patience.exhausted:
        if confirm is not None and confirm.stop_search(summary.ran, n_trials):
            break  # the trials left re-measure the close pair
        fail_stale_trials(study)  # a dead worker's trial: FAIL worker-died, queued again
        wait_for_probe_reference(study, space, say=progress.console.print)
        require_probe_reference(study, space)  # a failed baseline: stop, nothing can be checked
        require_baseline_goodput(study, space)  # a baseline that met no rate: no floor to judge by
        view = read_view(study, space)  # once per iteration: other workers' results too
        finished = view.finished_by_key()
        _queue_proposal(study, space, strategy, view, progress)
        trial = study.ask()
        try:
            is_baseline = bool(trial.user_attrs.get(attrs.IS_BASELINE))
            chosen_by, sampled = why_chosen(trial, strategy)
            config = space.suggest(trial)
            key = config.key()
            attrs.set(trial, attrs.CONFIG, dict(config))
            attrs.set(trial, attrs.CONFIG_KEY, key)
            attrs.set(trial, attrs.CHOSEN_BY, chosen_by)
            attrs.set(trial, attrs.WORKER, worker_id())
            attrs.set(trial, "host", runner.target.host.name)
            attrs.set(trial, "emulated", runner.target.emulated)
            violations = [] if is_baseline else space.constraint_violations(config)
            skips = [v.reason for v in violations if v.action == "skip"]
            if not is_baseline and unavailable_patches:
                needed = unavailable_patches & set(space.render(config, resolve=False).patches)
                skips += [f"patch {name} does not apply on this host" for name in sorted(needed)]
            earlier = finished.get(key)
            gate = _feasibility(feasibility, sampled, config, earlier)
            if skips:
                attrs.set_outcome(trial, Outcome.CONSTRAINT, "constraint: " + "; ".join(skips))
                study.tell(trial, state=TrialState.PRUNED)
                summary.skipped += 1
                progress.trial_skipped(trial.number, "constraint: " + "; ".join(skips))
            elif gate is not None and gate.skip is not None:
                attrs.set_outcome(trial, Outcome.GATED, gate.skip)
                study.tell(trial, state=TrialState.PRUNED)
                summary.skipped_unsafe += 1
                progress.trial_skipped(trial.number, gate.skip)
            elif earlier is not None:
                _reuse(study, trial, view.frozen(earlier.number))
                summary.reused += 1
                progress.trial_skipped(trial.number, f"same as trial {earlier.number}: reused")
            else:
                if gate is not None and gate.note is not None:
                    chosen_by = f"{chosen_by}; {gate.note}"
                    attrs.set(trial, attrs.CHOSEN_BY, chosen_by)
                idle = -1
                summary.ran += 1
                with get_heartbeat_thread(trial._trial_id, study._storage):
                    if not is_baseline:  # another worker may have asked for the baseline between
                        _await_reference(study, space, trial, progress)  # the wait above and ask
                    state = _run_one(study, space, runner, trial, config, is_baseline, chosen_by, summary, progress)
                summary.states[state.name] = summary.states.get(state.name, 0) + 1
                frozen = study._storage.get_trial(trial._trial_id)
                if feasibility is not None:
                    feasibility.record_trial(frozen)
                patience.record(frozen.values[0] if frozen.state == TrialState.COMPLETE else None)
        except KeyboardInterrupt:
            _fail_if_running(study, trial, "interrupted", "Ctrl-C: this configuration may run again")
            raise
        idle += 1
        if idle >= MAX_IDLE_ASKS:
            summary.exhausted = True
            break
    require_baseline_goodput(study, space)  # also when the baseline was the run's last trial
    summary.patience_stop = patience.exhausted
    if confirm is not None:
        summary.remeasured = confirm.run(runner, n_trials - summary.ran, progress)
    progress.run_finished(summary)
    return summary


def _await_reference(study: optuna.Study, space: Any, trial: optuna.Trial, progress: ProgressView) -> None:
    """Wait, inside this trial (its heartbeat running), for the baseline's probe outputs.

    The wait before ``ask`` and the ``ask`` are not one step: a second worker that found no
    baseline running yet may be handed the next queued configuration just as the first worker
    starts the baseline, and would probe it with nothing to compare against (an enqueued fa3 then
    passed, on CI). Raises the reference's error with this trial recorded FAIL."""
    wait_for_probe_reference(study, space, say=progress.console.print)
    try:
        require_probe_reference(study, space)
    except TunerError as error:
        _fail_if_running(study, trial, "host-error", str(error))
        raise


def _fail_if_running(study: optuna.Study, trial: optuna.Trial, reason: str, detail: str) -> None:
    """Record an interrupted trial as FAIL (unless it already finished), so none stays RUNNING."""
    if study._storage.get_trial(trial._trial_id).state != TrialState.RUNNING:
        return
    attrs.set(trial, attrs.FAILURE_REASON, reason)
    attrs.set(trial, attrs.FAILURE_DETAIL, detail)
    study.tell(trial, state=TrialState.FAIL)


def _feasibility(
    feasibility: FeasibilityCheck | None,
    sampled: bool,
    config: Any,
    earlier: TrialRecord | None,
) -> GateDecision | None:
    """The gate's decision on a configuration the sampler drew (never the baseline, a queued or
    proposed one, a dead worker's retried one, or one that ran clean before)."""
    if feasibility is None or not sampled:
        return None
    if earlier is not None and earlier.outcome != Outcome.FAILED:
        return None
    return feasibility.decide(config)


def _run_one(
    study: optuna.Study,
    space: Any,
    runner: TrialRunner,
    trial: optuna.Trial,
    config: Any,
    is_baseline: bool,
    chosen_by: str,
    summary: OptimizeSummary,
    progress: ProgressView,
) -> TrialState:
    launch = space.render(
        config, command=runner.target.command, port=runner.target.port, local=runner.target.local
    )
    with attrs.scrubbing(Scrubber.of(launch.secret_values())):  # nothing stored shows a secret
        return _run_launch(study, runner, trial, config, launch, is_baseline, chosen_by, summary,
                           progress)


def _run_launch(
    study: optuna.Study,
    runner: TrialRunner,
    trial: optuna.Trial,
    config: Any,
    launch: Any,
    is_baseline: bool,
    chosen_by: str,
    summary: OptimizeSummary,
    progress: ProgressView,
) -> TrialState:
    attrs.set(trial, "command_line", launch.command_line)
    attrs.set(trial, "env", launch.masked_env())
    attrs.set(trial, "patches", sorted(launch.patches))
    if launch.warnings:
        attrs.set(trial, "warnings", list(launch.warnings))
    progress.trial_started(trial.number, summary.ran, config, is_baseline, chosen_by)
    runner.on_phase = progress.phase
    runner.on_level = progress.level_done
    runner.on_energy = progress.level_energy
    started = time.monotonic()
    try:
        value = runner.run(trial, config, launch)
    except optuna.TrialPruned as pruned:
        attrs.set_outcome(trial, Outcome.BELOW_BASELINE, str(pruned))
        study.tell(trial, state=TrialState.PRUNED)
        progress.trial_finished(trial.number, "PRUNED", None, str(pruned), time.monotonic() - started)
        return TrialState.PRUNED
    except ServerFailure as failure:
        attrs.set(trial, attrs.FAILURE_REASON, failure.reason)
        attrs.set(trial, attrs.FAILURE_DETAIL, failure.detail)
        attrs.set(trial, "failure_excerpt", failure.excerpt)
        attrs.set(trial, "failure_noticed_at", failure.noticed_at)
        study.tell(trial, state=TrialState.FAIL)
        progress.trial_finished(trial.number, "FAIL", None, str(failure), time.monotonic() - started)
        return TrialState.FAIL
    except TunerError as error:  # host trouble: the configuration is not to blame
        attrs.set(trial, attrs.FAILURE_REASON, "host-error")
        attrs.set(trial, attrs.FAILURE_DETAIL, str(error))
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
