"""One trial on the host: patch, start, wait until ready, probe, measure each level, tear down.

The trial's outcome follows Optuna's semantics: it returns the objective value (COMPLETE), raises
``optuna.TrialPruned`` when it cannot beat the baseline (PRUNED), or raises
:class:`tuner.errors.ServerFailure` when its server crashed, hung or answered wrongly (FAIL).
Everything measured is stored on the trial as it arrives, so a failed trial keeps its partial
measurements and a killed tuner loses no completed level.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

import optuna

from tuner.failures import FailureClass
from tuner.errors import NoAnswerInTime, ServerFailure, TunerError
from tuner.handover import server_gpus
from tuner.lifecycle import ServerSession
from tuner.loadgen import (
    Dialect,
    LevelMetrics,
    LevelSpec,
    ServerAnswered,
    fetch_emulated_startup_s,
    run_level,
)
from tuner.signals import TrialObservations, observe_level, sample_metrics
from tuner.patches import PatchManager
from tuner.probe import run_probe
from tuner.study.record import (
    add_energy,
    PROBE_REFERENCE,
    ENGINE_VERSION,
    HANDOVER_WAIT_S,
    HOST_SECONDS,
    IS_BASELINE,
    LEVELS,
    LOG_EXCERPT,
    LOG_FILE,
    NOTE,
    PATCH_CHECKSUMS,
    PROBE_OUTPUTS,
    READY_S,
    RUN_DIR,
    SERVER_LOG_MTIME,
    STABLE,
    BOUND_LEVELS,
    TELEMETRY,
    store,
    store_level_figures,
    store_observations,
    figures_by_level,
    read_levels,
    trial_figure,
)
from tuner.study.trial._goodput import measure_goodput
from tuner.study.trial._pruner import (
    measurement_order,
    should_prune_against_baseline,
)
from tuner.study.trial._target import Target
from tuner.study.trial._traffic import request_dialect
from tuner.telemetry import SAMPLE_MS, GpuSampler, under_utilised

if TYPE_CHECKING:
    from tuner.space import Config, LaunchSpec, Objective, SearchSpace, Workload

__all__ = [
    "LevelRun",
    "ObjectiveValue",
    "TrialRunner",
    "host_seconds",
    "objective_value",
    "MIN_WALL_TIMEOUT_S",
]

# Timeouts are host seconds divided by the emulator's time scale, but starting a process costs
# the same wall time at any scale: no phase gets less than this many wall seconds.
MIN_WALL_TIMEOUT_S = 30.0
# How often readiness is asked of an emulated server (a real one: every 0.2 s). Its start-up
# lasts 0.4-0.6 s of wall time at K=400: a 0.2 s poll would add a fifth of it on average.
EMULATED_READY_POLL_S = 0.05
# When the client ends a level early, how long the server watcher gets to classify why.
CLASSIFY_WAIT_S = 2.0


class ObjectiveValue(NamedTuple):
    """A trial's objective values (None: no level counts) and whether every level ran clean."""

    values: list[float] | None
    stable: bool


class LevelRun(NamedTuple):
    """One level's client figures and its GPU telemetry summary (None: no sample)."""

    metrics: LevelMetrics
    gpu: dict[str, Any] | None


def objective_value(levels: list[dict[str, Any]], objective: Objective) -> ObjectiveValue:
    """The objective values and whether every level ran clean: the study's one rule
    (:func:`tuner.study.record.trial_figure`) on the trial's levels.

    The first value is the best ``objective.metric`` (output tokens/s) over every clean level
    that meets the SLOs, a level the client under-drove counting as the lower bound it is; in
    multi-objective mode the second is ``objective.minimize`` (a latency) at that same level.
    """
    figure = trial_figure(
        levels, objective.metric, objective.max_failed_fraction, objective.slo, objective.minimize
    )
    if figure.value is None:
        return ObjectiveValue(None, figure.stable)
    values = [figure.value]
    if objective.minimize and figure.latency is not None:
        values.append(figure.latency)
    return ObjectiveValue(values, figure.stable)


def host_seconds(wall_s: float, emulated_s: float, scale: Any) -> float:
    """A trial's host time: on a real host its wall time; on an emulated one, what the emulator
    stood for (``emulated_s`` host seconds: its start-up, its levels, which took
    ``emulated_s / K`` of the wall time) plus the rest of the wall time, the tuner's own work
    (starting processes, probing, warming up, storing), at its real duration. A start the
    emulator did not report (it failed) counts at ``K`` times its wall time, as it ran."""
    if not scale.emulated:
        return wall_s
    if emulated_s <= 0:
        return scale.duration(wall_s)
    return emulated_s + max(0.0, wall_s - scale.to_server(emulated_s))


@dataclass
class TrialRunner:
    """Runs trials of one study on one target.

    Args:
        space: the validated search space.
        target: host, engine, command and time scale.
        patches: the patch manager of the target's host.
        study: the Optuna study (for the probe reference).
        local_runs_dir: where server logs are copied on this machine.
        emulate: use the emulated workload.
        on_phase: called with a short description of each phase (progress display).
        on_level: called with each level's metrics.
    """

    space: SearchSpace
    target: Target
    patches: PatchManager
    study: optuna.Study
    local_runs_dir: Path
    emulate: bool = False
    engine_version: str | None = None
    on_phase: Callable[[str], None] = lambda text: None
    on_level: Callable[[LevelMetrics, int, int], None] = lambda m, k, n: None
    on_energy: Callable[[float | None], None] = lambda tokens_per_joule: None  # before on_level
    requests: Any = (
        None  # the workload's request source (tuner.study.traffic), None: random tokens
    )
    _emulated_s: float = field(default=0.0, init=False, repr=False)  # see host_seconds

    def run(self, trial: optuna.Trial, config: Config, launch: LaunchSpec) -> list[float]:
        """Run one trial; see the module docstring for outcomes."""
        scale = self.target.time_scale
        timeouts = self.space.timeouts
        workload = self.space.workload_for(self.emulate)
        run_dir = (
            f"{self.target.run_root.rstrip('/')}/{self.study.study_name}/trial-{trial.number:04d}"
        )
        store(trial, RUN_DIR, run_dir)
        session = ServerSession(
            self.target.host,
            self.target.profile,
            launch.argv,
            {**launch.env, **self.target.env},
            self.target.port,
            run_dir,
            stop_grace_s=scale.to_server(timeouts.stop_grace_s),
            stop_command=self.target.stop_command,
            idle_gpus=self.target.gpu_idle,
            secret_flags=launch.secret_flags,
            secrets=launch.secret_values(),
            api_key=launch.api_key,
        )
        started = time.monotonic()
        self._emulated_s = 0.0  # host seconds the emulator stood for: its start-up, its levels
        try:
            self.on_phase("patching")
            self.patches.set_active(set(launch.patches))
            store(trial, PATCH_CHECKSUMS, self.patches.checksums())
            self.on_phase("starting server")
            with session:
                self.on_phase("waiting until ready")
                ready_s = session.wait_ready(
                    max(MIN_WALL_TIMEOUT_S, scale.to_server(timeouts.ready_s)),
                    poll_s=EMULATED_READY_POLL_S if scale.emulated else None,
                )
                startup_s = (
                    fetch_emulated_startup_s(session.base_url, headers=session.client_headers)
                    if scale.emulated
                    else None
                )
                if startup_s is not None:
                    self._emulated_s += startup_s
                store(
                    trial,
                    READY_S,
                    round(startup_s if startup_s is not None else scale.duration(ready_s), 2),
                )
                self._probe(trial, session)
                if self.space.objective.metric == "goodput":
                    return measure_goodput(self, trial, session, workload)
                return self._measure(trial, session, workload)
        finally:
            store(
                trial,
                HOST_SECONDS,
                round(host_seconds(time.monotonic() - started, self._emulated_s, scale), 1),
            )
            if session.handover_wait_s >= 1.0:  # the previous server's GPU memory, still held
                store(trial, HANDOVER_WAIT_S, round(session.handover_wait_s, 1))
            store(trial, LOG_EXCERPT, session.log_excerpt())
            self._fetch_log(session, trial)
            store(trial, ENGINE_VERSION, self.engine_version)
            self.patches.set_active(set())

    def _probe(self, trial: optuna.Trial, session: ServerSession) -> None:
        probe = self.space.probe
        if not probe.prompts:
            return
        self.on_phase("correctness probe")
        session.phase = "probe"
        reference = (
            None
            if trial.user_attrs.get(IS_BASELINE)
            else self.study.user_attrs.get(PROBE_REFERENCE)
        )
        try:
            result = run_probe(
                session.base_url,
                self._api(),
                list(probe.prompts),
                probe.max_tokens,
                max(
                    MIN_WALL_TIMEOUT_S,
                    self.target.time_scale.to_server(self.space.timeouts.probe_s),
                ),
                reference=reference,
                required=probe.min_matching_prompts,
                headers=session.client_headers,
            )
        except NoAnswerInTime as error:
            raise session.failure() or ServerFailure(
                FailureClass.HANG, f"probe got no answer: {error}", session.log_excerpt()
            ) from None
        except TunerError as error:
            raise self._probe_failure(session, error) from None
        store(trial, PROBE_OUTPUTS, list(result.outputs))
        if trial.user_attrs.get(IS_BASELINE):
            self.study.set_user_attr(PROBE_REFERENCE, list(result.outputs))
        failure = session.failure()
        if failure is not None:
            raise failure
        if not result.passed:
            raise ServerFailure(
                FailureClass.WRONG_OUTPUT,
                f"{result.matching} of {len(result.outputs)} probe outputs match the baseline's "
                f"(need {result.required}); first: {result.outputs[0][:60]!r}",
                session.log_excerpt(),
            )

    def _probe_failure(self, session: ServerSession, error: TunerError) -> ServerFailure:
        """What a probe request that failed says about the configuration.

        A server can answer ``/health`` 200 and die at its first request (``transformers
        serve`` starts its batching worker then: a KV cache that does not fit fails it with 503,
        an attention implementation it has no paged variant of with 500). Its log says why a
        moment after the answer, so the watcher gets that moment first; a 5xx with nothing in the
        log is still the server failing, not its output being wrong.
        """
        found = session.wait_for_failure(CLASSIFY_WAIT_S)
        if found is not None:
            return found
        if isinstance(error, ServerAnswered) and error.status >= 500:
            return ServerFailure(
                FailureClass.STARTUP_CRASH,
                f"the server failed its first request: {error}",
                session.log_excerpt(),
            )
        return ServerFailure(
            FailureClass.WRONG_OUTPUT, f"probe request failed: {error}", session.log_excerpt()
        )

    def _api(self) -> Dialect:
        return request_dialect(self.space, self.space.workload.api or self.target.profile.api)

    def _measure(
        self, trial: optuna.Trial, session: ServerSession, workload: Workload
    ) -> list[float]:
        scale = self.target.time_scale
        levels: list[dict[str, Any]] = []
        telemetry: dict[str, Any] = {}
        observations = TrialObservations()
        cap = self.target.profile.running_cap(session.argv)
        n = len(workload.levels)
        asked = 0  # requests of the trial's levels so far: the next level's place in its stream
        for k, concurrency in enumerate(measurement_order(workload.levels), start=1):
            self.on_phase(f"level {k}/{n}: {concurrency} concurrent")
            session.phase = f"level-{concurrency}"
            spec = LevelSpec(
                concurrency=concurrency,
                num_requests=workload.requests_for(concurrency),
                input_len=workload.input_len,
                output_len=workload.output_len,
                time_limit_s=max(self.space.timeouts.level_s, scale.duration(MIN_WALL_TIMEOUT_S)),
                warmup=workload.warmup,  # every level: it also opens the connections
                seed=trial.number,
                dataset=self.requests,
                first_request=asked,
            )
            asked += spec.num_requests
            metrics, gpu = self._run_level(session, spec)
            metrics, gpu, asked = self._drive_harder(session, spec, levels, metrics, gpu, asked)
            self._emulated_s += metrics.duration_s if metrics.emulated else 0.0
            level = metrics.to_dict()
            if gpu is not None:
                telemetry[str(concurrency)] = gpu
                level["gpu"] = gpu
            self.on_energy(add_energy(level))
            levels.append(level)
            store(trial, LEVELS, levels)
            store_level_figures(trial, level)
            store(trial, TELEMETRY, telemetry)
            # unsuffixed too: the highest level measured so far
            observations.add(
                observe_level(session, concurrency, cap, level.get("gpu")), f"@{concurrency}"
            )
            store_observations(trial, observations)
            self.on_level(metrics, k, n)
            if metrics.stop_reason is not None:
                # The client often notices first; the server's own log says why (OOM, crash).
                raise session.wait_for_failure(CLASSIFY_WAIT_S) or _client_failure(
                    metrics, session
                )
            figure = level.get(self.space.objective.metric)
            if (
                figure is not None
                and metrics.clean(self.space.objective.max_failed_fraction)
                and self._should_prune(trial, levels, figure, concurrency)
            ):
                raise optuna.TrialPruned(
                    f"below the baseline's best by more than {self.space.objective.prune_margin:.0%} "
                    f"at every level from the top down to {concurrency} concurrent, and rising "
                    "with concurrency: the lower levels left cannot overturn it"
                )
        value, stable = objective_value(levels, self.space.objective)
        store(trial, STABLE, stable)
        objective = self.space.objective
        bound = trial_figure(levels, objective.metric, objective.max_failed_fraction).bound_levels
        if bound:  # the trial is marked: these figures are lower bounds
            store(trial, BOUND_LEVELS, list(bound))
        peak = max(levels, key=lambda lv: lv.get(self.space.objective.metric) or 0.0)
        if "gpu" in peak and under_utilised(peak["gpu"]):
            store(trial, NOTE, "under-utilised: peak-level GPU power below half the limit")
        if value is None and any(level.get("measurement_bound") for level in levels):
            raise ServerFailure(
                FailureClass.MEASUREMENT_BOUND,
                next(lv["measurement_bound"] for lv in levels if lv.get("measurement_bound")),
            )
        if value is None:
            raise ServerFailure(
                FailureClass.UNSTABLE.at(min(level["concurrency"] for level in levels)),
                "no level ran clean (failed requests above the limit)",
                session.log_excerpt(),
            )
        return value

    def _drive_harder(
        self,
        session: ServerSession,
        spec: LevelSpec,
        levels: list[dict[str, Any]],
        metrics: LevelMetrics,
        gpu: dict[str, Any] | None,
        asked: int,
    ) -> tuple[LevelMetrics, dict[str, Any] | None, int]:
        """A level the client under-drove, run again with twice the client processes (up to this
        machine's cores) until its shortfall moves its figure by under
        :data:`tuner.study.record.EXACT_WITHIN`; the better-driven result, and the requests asked.

        Each re-run takes fresh places of the trial's request stream (no prompt the server's
        prefix cache has seen). A re-run that is still a bound and reads less than the run
        before it does not replace it: a bound never sinks a figure."""
        objective = self.space.objective
        workers = max(1, self.target.client_workers)
        cores = os.cpu_count() or 1
        while workers < cores and metrics.stop_reason is None and metrics.measurement_bound:
            judged = figures_by_level(
                read_levels([*levels, metrics.to_dict()]),
                objective.metric,
                objective.max_failed_fraction,
            ).get(spec.concurrency)
            if judged is None or not judged.bound:
                break
            workers = min(cores, 2 * workers)
            self.on_phase(
                f"level {spec.concurrency}: the client under-drove it "
                f"({judged.in_flight or 0:.0f} of {spec.concurrency} in flight); "
                f"again with {workers} client processes"
            )
            again = replace(spec, first_request=asked)
            asked += again.num_requests
            more, more_gpu = self._run_level(session, again, workers=workers)
            kept = figures_by_level(
                read_levels([*levels, more.to_dict()]),
                objective.metric,
                objective.max_failed_fraction,
            ).get(spec.concurrency)
            runs = metrics.client_runs + 1
            if more.stop_reason is None and (
                kept is None or not kept.bound or kept.value >= judged.value
            ):
                metrics, gpu = more, more_gpu
            metrics = replace(metrics, client_runs=runs)
        return metrics, gpu, asked

    def _run_level(
        self, session: ServerSession, spec: LevelSpec, workers: int | None = None
    ) -> LevelRun:
        """One level against the running server, with GPU telemetry (of the server's own GPUs) and
        the server's /metrics sampled meanwhile (the search benchmark's model host replaces this
        one method); ``workers``: client processes (default: the target's ``--client-workers``)."""
        gpus = server_gpus(self.target.gpu_idle, session.argv)  # only the server's GPUs' power
        # every 250 ms of the host's time: an emulated level runs K times faster
        interval_ms = max(10, round(1000 * self.target.time_scale.to_server(SAMPLE_MS / 1000)))
        with (
            GpuSampler(
                self.target.host,
                interval_ms,
                env=self.target.env,
                gpus=gpus,
                busy_only=self.target.time_scale.emulated,
            ) as sampler,
            sample_metrics(session, self.target.time_scale.emulated),
        ):
            metrics = asyncio.run(
                run_level(
                    session.base_url,
                    spec,
                    api=self._api(),
                    stop_check=session.stop_reason,
                    time_scale=self.target.time_scale,
                    client_workers=workers or self.target.client_workers,
                    headers=session.client_headers,
                )
            )
        return LevelRun(
            metrics, sampler.summary.to_dict() if sampler.summary is not None else None
        )

    def _mtime(self, path: str) -> float | None:
        code = "import os, sys; print(os.stat(sys.argv[1]).st_mtime)"
        result = self.target.host.run(
            f"{shlex.quote(self.target.python)} -c {shlex.quote(code)} {shlex.quote(path)}"
        )
        return float(result.stdout.strip()) if result.ok else None

    def _should_prune(
        self, trial: optuna.Trial, levels: list[dict[str, Any]], value: float, concurrency: int
    ) -> bool:
        """Report the level (single objective: Optuna's pruner decides) or apply the same rule
        here (multi-objective studies take no ``report`` and no pruner)."""
        if not self.space.objective.minimize:
            trial.report(value, step=concurrency)
            return trial.should_prune()
        if trial.user_attrs.get(IS_BASELINE):
            return False
        objective = self.space.objective
        return should_prune_against_baseline(
            self.study,
            levels,
            metric=objective.metric,
            max_failed_fraction=objective.max_failed_fraction,
            margin=objective.prune_margin,
            all_levels=self.space.workload_for(self.emulate).levels,
        )

    def _fetch_log(self, session: ServerSession, trial: optuna.Trial) -> None:
        """Copy the server's log to ``local_runs_dir`` (0600), every secret value of the launch
        replaced by ``***`` (SGLang prints its ``api_key`` at start)."""
        if session.handle is None:
            return
        local = self.local_runs_dir / f"trial-{trial.number:04d}.log"
        try:
            local.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            with tempfile.TemporaryDirectory(dir=local.parent, prefix=".fetch-") as folder:
                raw = str(Path(folder) / "server.log")  # 0700 folder: unscrubbed, never readable
                self.target.host.fetch(session.handle.log_path, raw)
                session.scrubber.file(raw, str(local))
            store(trial, LOG_FILE, str(local.resolve()))
            store(trial, SERVER_LOG_MTIME, self._mtime(session.handle.log_path))
        except Exception:  # a lost log must not hide the trial's own outcome
            pass


def _client_failure(metrics: LevelMetrics, session: ServerSession) -> ServerFailure:
    """Why the client stopped a level the server did not fail: a level the client measured
    itself on (``measurement_bound``) is not the configuration's instability."""
    reason = metrics.stop_reason or ""
    if metrics.measurement_bound:
        return ServerFailure(
            FailureClass.MEASUREMENT_BOUND, f"{reason}; {metrics.measurement_bound}"
        )
    kind = (
        FailureClass.TIMEOUT
        if "time limit" in reason.lower()
        else FailureClass.UNSTABLE.at(metrics.concurrency)
    )
    return ServerFailure(kind, reason, session.log_excerpt())
