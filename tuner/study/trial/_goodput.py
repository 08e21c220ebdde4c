"""``objective.metric: goodput``: the highest request rate a configuration serves within the SLO.

Each configuration gets a bounded search over open-loop levels (like SGLang auto_benchmark's rate
search): from ``start_rate``, the rate doubles while levels meet the SLO, then the gap between the
highest rate met and the lowest missed is halved, for at most ``max_levels`` levels. A level meets
the rate when it ran clean, met every limit of ``objective.slo`` and the client sent at least
``min_achieved_fraction`` of the rate of the arrival schedule the level drew (a Poisson draw is
itself below 0.9x the rate asked now and then: a client that sends every request at its time
always meets it). Each level draws its own prompts and schedule, after those of the trial's
earlier levels, so no level is served from the prefix cache an earlier one filled.

The baseline rule: once the baseline's goodput G is known, another configuration's first level is
at G x (1 - prune_margin) (or ``start_rate`` when that is higher); missing a level at or below that
floor means its goodput cannot reach the baseline's, and the trial is PRUNED there. A first level
missed above the floor is followed by one at the floor. A trial that meets no rate at all is
PRUNED with its reason, never a COMPLETE goodput of 0 that could rank; a baseline that meets no
rate gives no floor to judge anything by, and the study stops (:func:`require_baseline_goodput`).

Each level stores what the server log and /metrics said during it (:mod:`tuner.signals`), as
``name@<rate>rps``; the unsuffixed figures are those of the highest rate tried, where a cap binds.

A ``measurement_bound`` level (the client measured itself, :mod:`tuner.loadgen._health`) does
not meet its rate, and the search goes down from it, but it never prunes: the miss is the
client's. Levels run through the trial runner's ``_run_level`` (GPU telemetry, client workers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import optuna
from optuna.trial import TrialState

from tuner.failures import FailureClass
from tuner.errors import ConfigError, ServerFailure
from tuner.signals import TrialObservations, observe_level
from tuner.space._problems import problem_message
from tuner.study.record import (
    GOODPUT,
    IS_BASELINE,
    LEVELS,
    NOTE,
    PRUNED_REASON,
    STABLE,
    TELEMETRY,
    store,
    store_observations,
)
from tuner.study.trial._traffic import rate_level

if TYPE_CHECKING:
    from tuner.lifecycle import ServerSession
    from tuner.loadgen import LevelMetrics, LevelSpec
    from tuner.space import Workload
    from tuner.space import SearchSpace
    from tuner.study.trial._target import Target

__all__ = [
    "NO_RATE_MET",
    "LevelRunner",
    "RateSearch",
    "baseline_goodput",
    "level_verdict",
    "measure_goodput",
    "require_baseline_goodput",
]

NO_RATE_MET = "goodput 0: no request rate met within the SLO, down to"  # a pruned_reason's start
CLASSIFY_WAIT_S = 2.0
MIN_WALL_TIMEOUT_S = 30.0


class LevelRunner(Protocol):
    """What :func:`measure_goodput` uses of the trial runner
    (:class:`tuner.study.trial.TrialRunner`): its study, space and target, its progress
    callbacks and one level against the running server (its metrics and GPU telemetry)."""

    space: SearchSpace
    target: Target
    study: optuna.Study
    requests: Any

    @property
    def on_phase(self) -> Callable[[str], None]: ...

    @property
    def on_level(self) -> Callable[[LevelMetrics, int, int], None]: ...

    def _run_level(
        self, session: ServerSession, spec: LevelSpec, workers: int | None = None
    ) -> tuple[LevelMetrics, dict[str, Any] | None]: ...


@dataclass
class RateSearch:
    """The rates to try, one level at a time: :meth:`next`, then :meth:`record` its verdict."""

    start_rate: float
    max_rate: float
    max_levels: int
    resolution: float
    floor: float | None = None  # the rate the baseline rule asks for first (None: baseline itself)
    met: float | None = None  # the highest rate met so far
    missed: float | None = None  # the lowest rate missed so far
    tried: list[float] = field(default_factory=list)

    def next(self) -> float | None:
        """The next rate to try, or None when the search is over."""
        if len(self.tried) >= self.max_levels:
            return None
        if not self.tried:
            return min(self.max_rate, max(self.start_rate, self.floor or 0.0))
        if self.missed is None:  # every level met so far: go up
            return (
                None
                if self.met is not None and self.met >= self.max_rate
                else min(self.max_rate, 2 * (self.met or 0))
            )
        if self.met is None:  # every level missed so far: go down
            if self.floor is None:
                return self.missed / 2
            # The baseline rule: a level at the floor decides (missed there: pruned by the runner).
            return self.floor if self.missed > self.floor else None
        if self.missed / self.met - 1 <= self.resolution:
            return None
        return (self.met + self.missed) / 2

    def record(self, rate: float, met: bool) -> None:
        """The verdict of the level at ``rate``."""
        self.tried.append(rate)
        if met:
            self.met = rate if self.met is None else max(self.met, rate)
        else:
            self.missed = rate if self.missed is None else min(self.missed, rate)

    @property
    def goodput(self) -> float:
        """The highest rate met (0 when none was)."""
        return self.met or 0.0


def level_verdict(level: dict[str, Any], objective: Any) -> str | None:
    """Why a level does not meet its rate within the SLO, or None when it does."""
    if level.get("stop_reason"):
        return f"stopped: {level['stop_reason']}"
    if level.get("measurement_bound"):
        return f"measurement-bound: {level['measurement_bound']}"
    failed = level["failed"] / max(1, level["completed"] + level["failed"])
    if failed > objective.max_failed_fraction:
        return f"{failed:.1%} of requests failed"
    unmet = objective.slo.unmet(level)
    if unmet:
        return unmet
    asked, sent = level.get("request_rate"), level.get("achieved_request_rate")
    drawn = level.get("scheduled_request_rate")  # None in a level of an older study that lacks it
    need = objective.goodput.min_achieved_fraction
    if asked and (sent is None or sent < need * (drawn or asked)):
        sent_text = f"sent {0 if sent is None else sent:.2f} req/s"
        if drawn:
            return f"{sent_text} of the {drawn:.2f} its schedule drew ({asked:g} asked)"
        return f"{sent_text} of {asked:g} asked"
    return None


def baseline_goodput(study: optuna.Study) -> float | None:
    """The baseline trial's goodput, once it completed."""
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        if frozen.user_attrs.get(IS_BASELINE) and frozen.value is not None:
            return float(frozen.value)
    return None


def measure_goodput(
    runner: LevelRunner, trial: optuna.Trial, session: ServerSession, workload: Workload
) -> list[float]:
    """Search this configuration's goodput on the running server (see the module docstring)."""
    objective = runner.space.objective
    search = objective.goodput
    scale = runner.target.time_scale
    reference = None if trial.user_attrs.get(IS_BASELINE) else baseline_goodput(runner.study)
    floor = reference * (1 - objective.prune_margin) if reference else None
    plan = RateSearch(
        search.start_rate, search.max_rate, search.max_levels, search.resolution, floor
    )
    levels: list[dict[str, Any]] = []
    telemetry: dict[str, Any] = {}
    observations = TrialObservations()
    profile = getattr(runner.target, "profile", None)
    cap = profile.running_cap(session.argv) if profile is not None else None
    time_limit = max(runner.space.timeouts.level_s, scale.duration(MIN_WALL_TIMEOUT_S))
    asked = 0  # requests of the trial's levels so far: the next level's place in its stream
    while (rate := plan.next()) is not None:
        k = len(plan.tried) + 1
        runner.on_phase(f"goodput level {k}/{search.max_levels}: {rate:g} req/s")
        session.phase = f"rate-{rate:g}"
        spec = rate_level(workload, rate, time_limit, trial.number, runner.requests, asked)
        asked += spec.num_requests
        metrics, gpu = runner._run_level(session, spec)
        if metrics.stop_reason is not None:
            failure = session.wait_for_failure(CLASSIFY_WAIT_S)
            if failure is not None:  # the server crashed: the configuration is broken
                raise failure
        level = metrics.to_dict()
        if gpu is not None:
            telemetry[f"{rate:g}rps"] = gpu
            level["gpu"] = gpu
        why = level_verdict(level, objective)
        level["meets_slo"], level["slo_miss"] = why is None, why
        levels.append(level)
        plan.record(rate, why is None)
        store(trial, LEVELS, levels)
        store(trial, TELEMETRY, telemetry)
        store(trial, f"tps@{rate:g}rps", level["output_throughput"])
        store(trial, f"p99_ttft_ms@{rate:g}rps", level["p99_ttft_ms"])
        store(trial, GOODPUT, plan.goodput)
        seen = observe_level(session, int(level["concurrency"]), cap, level.get("gpu"))
        # unsuffixed: the highest rate tried so far
        observations.add(seen, f"@{rate:g}rps", top=rate >= max(plan.tried))
        store_observations(trial, observations)
        runner.on_level(metrics, k, search.max_levels)
        if (
            floor is not None
            and why is not None
            and rate <= floor
            and not metrics.measurement_bound
        ):
            raise optuna.TrialPruned(
                f"goodput below {floor:.3g} req/s (the baseline's {reference:.3g} less "
                f"{objective.prune_margin:.0%}): missed at {rate:g} req/s, {why}"
            )
    store(trial, STABLE, all(not lv.get("stop_reason") for lv in levels))
    bound = [lv for lv in levels if lv.get("measurement_bound")]
    if plan.met is None and bound:
        raise ServerFailure(FailureClass.MEASUREMENT_BOUND, bound[0]["measurement_bound"])
    if bound:
        store(
            trial,
            NOTE,
            f"goodput capped by the client: measurement-bound at "
            f"{min(lv['request_rate'] for lv in bound):g} req/s",
        )
    if plan.met is None and all(lv.get("stop_reason") for lv in levels):
        raise ServerFailure(
            FailureClass.UNSTABLE.at(levels[0]["concurrency"]),
            "no level ran to its end",
            session.log_excerpt(),
        )
    if plan.met is None and floor is not None:  # the floor's level was not reached (max_levels)
        raise optuna.TrialPruned(
            f"goodput below {floor:.3g} req/s (the baseline's {reference:.3g} less "
            f"{objective.prune_margin:.0%}): no level met, down to {min(plan.tried):g} req/s"
        )
    if plan.met is None:  # no baseline to compare with (or this is it): a 0 must not rank
        lowest = min(levels, key=lambda lv: lv["request_rate"])
        raise optuna.TrialPruned(
            f"{NO_RATE_MET} {lowest['request_rate']:g} req/s ({lowest['slo_miss']})"
        )
    return [plan.goodput]


def require_baseline_goodput(study: optuna.Study, space: SearchSpace) -> None:
    """Raise when the study's baseline met no request rate and none is queued or running.

    Its goodput of 0 gives no floor: every configuration would be judged against nothing, so
    the study stops there, as it does when the baseline gives no probe reference
    (:mod:`tuner.study.trial._probe_reference`).

    Raises:
        ConfigError: the baseline ended PRUNED for meeting no rate; the message names the
            lowest rate tried, why it was missed, and what to change (``start_rate``, the SLO).
    """
    if space.objective.metric != "goodput":
        return
    baselines = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get(IS_BASELINE)]
    pending = (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE)
    if not baselines or any(t.state in pending for t in baselines):
        return
    last = baselines[-1]
    reason = str(last.user_attrs.get(PRUNED_REASON) or "")
    if last.state != TrialState.PRUNED or not reason.startswith(NO_RATE_MET):
        return
    lowest = min(
        (lv["request_rate"] for lv in last.user_attrs.get(LEVELS, [])),
        default=space.objective.goodput.start_rate,
    )
    slo = ", ".join(
        f"{name} {value:g}"
        for name, value in space.objective.slo.model_dump().items()
        if value is not None
    )
    where = ("objective", "goodput", "start_rate")
    raise ConfigError(
        problem_message(
            space.document.file,
            space.document.line_of(where),
            where,
            f"the baseline (trial {last.number}) ended PRUNED, {reason}",
            f"set start_rate below {lowest:g} req/s, or loosen objective.slo ({slo}); then run "
            "again with --allow-changed (the baseline runs again)",
        )
    )
