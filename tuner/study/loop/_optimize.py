"""The optimize loop: baseline first, then sampled configurations, until the budget is spent.

``--trials N`` counts configurations actually run on the host. A configuration excluded by a
constraint is recorded as PRUNED with its reason, and one identical to an earlier trial reuses
that trial's result; neither costs host time nor budget. A FAIL keeps its reason class and log
excerpt. Ctrl-C (or a killed tuner) loses no completed trial: the interrupted trial is recorded as
FAIL (``interrupted``, or ``worker-died`` when found on the next start) and may run again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import TrialState

from tuner.failures import FailureClass
from tuner.interrupts import interrupts_held
from tuner.errors import TunerError
from tuner.scrub import Scrubber
from tuner.study.loop._confirm import Confirmation
from tuner.study.record import (
    HOST_SECONDS,
    CHOSEN_BY,
    COMMAND_LINE,
    CONFIG,
    CONFIG_KEY,
    EMULATED,
    ENV,
    HOST,
    IS_BASELINE,
    PATCHES,
    WARNINGS,
    WORKER,
    Outcome,
    TrialOutcome,
    TrialRecord,
    read_view,
    scrubbing,
    store,
    write_outcome,
    write_trial_note,
)
from tuner.study.trial import (
    FeasibilityCheck,
    GateDecision,
    TrialRunner,
    outcome_without_running,
    require_baseline_goodput,
    require_probe_reference,
    run_outcome,
    wait_for_probe_reference,
)
from tuner.study.loop._choosing import ensure_baseline_queued, queue_proposal, why_chosen
from tuner.study.loop._progress import ProgressView
from tuner.study.storage import fail_stale_trials, frozen_trial, heartbeat, storage_file, worker_id
from tuner.study.strategies import Strategy, StudySampler

if TYPE_CHECKING:
    from tuner.space import Config, LaunchSpec
    from tuner.space import SearchSpace

__all__ = ["optimize_study", "OptimizeSummary", "MAX_IDLE_ASKS", "MAX_REFUSED_ASKS"]

# How many configurations in a row may be reused (asked again after they were settled) before the
# space counts as exhausted. Refusals of configurations (a constraint, the fit, the feasibility
# gate) cost no host time and say nothing about exhaustion: a space with large refused regions
# (TP4 that cannot hold the model, TP6 with 4-way DP attention) may refuse many in a row, up to
# MAX_REFUSED_ASKS.
MAX_IDLE_ASKS = 30
MAX_REFUSED_ASKS = 300


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
    remeasured: int = (
        0  # re-runs of a close best and runner-up (tuner.study.loop._confirm), in the budget
    )

    def settled(self, outcome: Outcome) -> None:
        """Count a configuration settled without running (skipped, gated or reused)."""
        if outcome == Outcome.CONSTRAINT:
            self.skipped += 1
        elif outcome == Outcome.GATED:
            self.skipped_unsafe += 1
        else:
            self.reused += 1


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


def optimize_study(
    study: optuna.Study,
    space: SearchSpace,
    runner: TrialRunner,
    n_trials: int,
    progress: ProgressView,
    unavailable_patches: set[str] | frozenset[str] = frozenset(),
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
    With ``confirm``, the end of the budget re-measures a close best and runner-up; when their
    re-runs read them apart before the budget is spent, the rest of it searches again.
    """
    strategy = strategy or StudySampler(study)
    summary = OptimizeSummary()
    ensure_baseline_queued(study, space)
    patience = Patience(space.objective.patience)
    idle = refused = 0  # asks in a row that reused a settled configuration / were refused
    progress.run_started(n_trials, study)
    while True:  # search, re-measure a close pair, and search on if its re-runs end early
        while summary.ran + summary.remeasured < n_trials and not patience.exhausted:
            if confirm is not None and confirm.stop_search(
                summary.ran, n_trials - summary.remeasured
            ):
                break  # the trials left re-measure the close pair
            fail_stale_trials(study)  # a dead worker's trial: FAIL worker-died, queued again
            wait_for_probe_reference(study, space, say=progress.console.print)
            require_probe_reference(
                study, space
            )  # a failed baseline: stop, nothing can be checked
            require_baseline_goodput(
                study, space
            )  # a baseline that met no rate: no floor to judge by
            view = read_view(study, space)  # once per iteration: other workers' results too
            finished = view.finished_by_key()
            queue_proposal(study, space, strategy, view, progress.console)
            trial = None
            try:
                # a signal inside ask() would leave a RUNNING trial nobody fails: held, it is
                # raised once the trial exists, and the trial is failed as interrupted below
                with interrupts_held("the next trial is created"):
                    trial = study.ask()
                is_baseline = bool(trial.user_attrs.get(IS_BASELINE))
                chosen_by, sampled = why_chosen(trial, strategy)
                config = space.suggest(trial)
                key = config.key()
                store(trial, CONFIG, dict(config))
                store(trial, CONFIG_KEY, key)
                store(trial, CHOSEN_BY, chosen_by)
                store(trial, WORKER, worker_id())
                store(trial, HOST, runner.target.host.name)
                store(trial, EMULATED, runner.target.emulated)
                earlier = finished.get(key)
                gate = _feasibility(feasibility, sampled, config, earlier)
                settled = outcome_without_running(
                    space,
                    config,
                    is_baseline=is_baseline,
                    unavailable_patches=unavailable_patches,
                    gate=gate,
                    earlier=view.frozen(earlier.number) if earlier is not None else None,
                )
                if settled is not None:
                    write_outcome(study, trial, settled)
                    summary.settled(settled.outcome)
                    if settled.outcome in (Outcome.CONSTRAINT, Outcome.GATED):
                        refused += 1
                    else:
                        idle += 1
                    progress.trial_skipped(trial.number, settled.message)
                else:
                    if gate is not None and gate.note is not None:
                        chosen_by = f"{chosen_by}; {gate.note}"
                        store(trial, CHOSEN_BY, chosen_by)
                    idle = refused = 0
                    summary.ran += 1
                    with heartbeat(study, trial.number):
                        if (
                            not is_baseline
                        ):  # another worker may have asked for the baseline between
                            _await_reference(
                                study, space, trial, progress
                            )  # the wait above and ask
                        state = _run_one(
                            study,
                            space,
                            runner,
                            trial,
                            config,
                            is_baseline,
                            chosen_by,
                            summary,
                            progress,
                        )
                    summary.states[state.name] = summary.states.get(state.name, 0) + 1
                    frozen = frozen_trial(study, trial.number)
                    if feasibility is not None:
                        feasibility.record_trial(frozen)
                    patience.record(
                        frozen.values[0] if frozen.state == TrialState.COMPLETE else None
                    )
            except KeyboardInterrupt:
                if trial is not None:
                    _fail_if_running(
                        study,
                        trial,
                        TrialOutcome.run_failed(
                            FailureClass.INTERRUPTED, "Ctrl-C: this configuration may run again"
                        ),
                    )
                raise
            if idle >= MAX_IDLE_ASKS or idle + refused >= MAX_REFUSED_ASKS:
                summary.exhausted = True
                break
        require_baseline_goodput(study, space)  # also when the baseline was the run's last trial
        summary.patience_stop = patience.exhausted
        if confirm is None:
            break
        left = n_trials - summary.ran - summary.remeasured
        made = confirm.run(runner, left, progress)
        summary.remeasured += made
        # the re-runs read the pair apart before the budget was spent (no close pair is left to
        # re-measure: not a host that failed): the rest of the budget searches again
        if not (0 < made < left) or confirm.needed() or summary.exhausted or patience.exhausted:
            break
    progress.run_finished(summary)
    return summary


def _await_reference(
    study: optuna.Study, space: SearchSpace, trial: optuna.Trial, progress: ProgressView
) -> None:
    """Wait, inside this trial (its heartbeat running), for the baseline's probe outputs.

    The wait before ``ask`` and the ``ask`` are not one step: a second worker that found no
    baseline running yet may be handed the next queued configuration just as the first worker
    starts the baseline, and would probe it with nothing to compare against (an enqueued fa3 then
    passed, on CI). Raises the reference's error with this trial recorded FAIL."""
    wait_for_probe_reference(study, space, say=progress.console.print)
    try:
        require_probe_reference(study, space)
    except TunerError as error:
        _fail_if_running(
            study, trial, TrialOutcome.run_failed(FailureClass.HOST_ERROR, str(error))
        )
        raise


def _fail_if_running(study: optuna.Study, trial: optuna.Trial, result: TrialOutcome) -> None:
    """Record an interrupted trial's outcome (unless it already finished), so none stays RUNNING."""
    if frozen_trial(study, trial.number).state != TrialState.RUNNING:
        return
    write_outcome(study, trial, result)


def _feasibility(
    feasibility: FeasibilityCheck | None,
    sampled: bool,
    config: Config,
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
    space: SearchSpace,
    runner: TrialRunner,
    trial: optuna.Trial,
    config: Config,
    is_baseline: bool,
    chosen_by: str,
    summary: OptimizeSummary,
    progress: ProgressView,
) -> TrialState:
    target = runner.target
    launch = space.render(
        config, command=target.server_command(trial.number), port=target.port, local=target.local
    )
    with scrubbing(Scrubber.of(launch.secret_values())):  # nothing stored shows a secret
        return _run_launch(
            study, runner, trial, config, launch, is_baseline, chosen_by, summary, progress
        )


def _run_launch(
    study: optuna.Study,
    runner: TrialRunner,
    trial: optuna.Trial,
    config: Config,
    launch: LaunchSpec,
    is_baseline: bool,
    chosen_by: str,
    summary: OptimizeSummary,
    progress: ProgressView,
) -> TrialState:
    store(trial, COMMAND_LINE, launch.command_line)
    store(trial, ENV, launch.masked_env())
    store(trial, PATCHES, sorted(launch.patches))
    if launch.warnings:
        store(trial, WARNINGS, list(launch.warnings))
    progress.trial_started(trial.number, summary.ran, config, is_baseline, chosen_by)
    runner.on_phase = progress.phase
    runner.on_level = progress.level_done
    runner.on_energy = progress.level_energy
    started = time.monotonic()
    result = run_outcome(lambda: runner.run(trial, config, launch))
    write_outcome(study, trial, result)
    value = result.values[0] if result.state == TrialState.COMPLETE and result.values else None
    write_trial_note(  # what the line above said, in the dashboard's trial view
        trial,
        baseline=progress.baseline,
        config=dict(config),
        is_baseline=is_baseline,
        chosen_by=chosen_by,
        state=result.state.name,
        value=progress.value_text(value) if value is not None else None,
        reason=result.message,
        emulated=progress.scale.emulated,
    )
    progress.trial_finished(
        trial.number,
        result.state.name,
        value,
        result.message,
        time.monotonic() - started,
        host_seconds=trial.user_attrs.get(HOST_SECONDS),
    )
    return result.state


def local_runs_dir(storage_url: str, study_name: str) -> Path:
    """Where server logs of this study are copied on this machine."""
    path = storage_file(storage_url)
    base = path.parent if path is not None else Path("studies")
    return base / "runs" / study_name
