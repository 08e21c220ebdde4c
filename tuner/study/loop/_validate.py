"""``tuner validate``: soak the best configurations before anyone deploys them.

A configuration that starts cleanly and survives a short level can still fail under sustained
load (vllm#21410: out of memory long after start-up). Each of the best K stable trials is started
again and held at its peak concurrency for ``duration`` host seconds, split into ``repeats``
windows whose throughputs give a spread. A crash or errors during the soak mark the trial
unstable; ``tuner export`` then never picks it. Results are stored on the trial as ``validation``.
The soaks run under the host's claim (:class:`tuner.host.HostClaim`), like ``tuner optimize``.
"""

from __future__ import annotations

import asyncio
import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import optuna
from rich.console import Console

from tuner.errors import ServerFailure, TunerError
from tuner.lifecycle import ServerSession
from tuner.loadgen import LevelSpec, run_level
from tuner.patches import PatchManager
from tuner.study.loop._host_claim import claim_host, release_host
from tuner.study.trial._runner import CLASSIFY_WAIT_S, MIN_WALL_TIMEOUT_S
from tuner.study.record import VALIDATION, Level, TrialRecord, records
from tuner.study.trial import Target, request_dialect

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = ["ValidationResult", "validate_study", "DEFAULT_SOAK_S"]

DEFAULT_SOAK_S = 600.0  # host seconds per configuration (10 minutes on a real host)


@dataclass(frozen=True)
class ValidationResult:
    """The soak of one trial's configuration."""

    trial: int
    stable: bool
    concurrency: int
    runs: int
    throughputs: list[float] = field(default_factory=list)
    mean_output_throughput: float = 0.0
    std_output_throughput: float = 0.0
    reason: str | None = None
    emulated: bool = False
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _peak_level(record: TrialRecord, metric: str) -> Level:
    clean = [level for level in record.levels if level.stop_reason is None]
    return max(clean or record.levels, key=lambda level: level.figure(metric))


def _candidates(study: optuna.Study, top: int) -> list[TrialRecord]:
    stable = [
        r for r in records(study) if r.stable and r.value is not None and r.reused_from is None
    ]
    return sorted(stable, key=lambda r: r.value or 0.0, reverse=True)[:top]


def _soak(
    space: SearchSpace,
    target: Target,
    session: ServerSession,
    record: TrialRecord,
    duration_s: float,
    repeats: int,
) -> ValidationResult:
    objective = space.objective
    peak = _peak_level(record, objective.metric)
    concurrency = int(peak.concurrency)
    workload = space.workload_for(target.emulated)
    window_s = duration_s / repeats
    expected_tokens = (record.value or 0.0) * window_s
    num_requests = max(concurrency, math.ceil(expected_tokens / workload.output_len))
    throughputs: list[float] = []
    for index in range(repeats):
        session.phase = f"level-{concurrency}"
        spec = LevelSpec(
            concurrency=concurrency,
            num_requests=num_requests,
            input_len=workload.input_len,
            output_len=workload.output_len,
            time_limit_s=max(3 * window_s, target.time_scale.duration(MIN_WALL_TIMEOUT_S)),
            seed=10_000 + index,
        )
        dialect = request_dialect(space, workload.api or target.profile.api)
        metrics = asyncio.run(
            run_level(
                session.base_url,
                spec,
                api=dialect,
                stop_check=session.stop_reason,
                time_scale=target.time_scale,
                headers=session.client_headers,
            )
        )
        failure = (
            session.wait_for_failure(CLASSIFY_WAIT_S) if metrics.stop_reason else session.failure()
        )
        if failure is not None or metrics.stop_reason is not None:
            reason = str(failure) if failure is not None else metrics.stop_reason
            return ValidationResult(
                record.number,
                False,
                concurrency,
                index + 1,
                throughputs,
                reason=f"soak run {index + 1}: {reason}",
                emulated=metrics.emulated,
                duration_s=duration_s,
            )
        if not metrics.clean(objective.max_failed_fraction):
            return ValidationResult(
                record.number,
                False,
                concurrency,
                index + 1,
                throughputs,
                reason=f"soak run {index + 1}: {metrics.failed} failed requests",
                emulated=metrics.emulated,
                duration_s=duration_s,
            )
        throughputs.append(float(getattr(metrics, objective.metric)))
    return ValidationResult(
        record.number,
        True,
        concurrency,
        repeats,
        throughputs,
        mean_output_throughput=statistics.fmean(throughputs),
        std_output_throughput=statistics.stdev(throughputs) if len(throughputs) > 1 else 0.0,
        emulated=target.emulated,
        duration_s=duration_s,
    )


def store_validation(study: optuna.Study, result: ValidationResult) -> None:
    """Keep the soak's result in the study (Optuna freezes a finished trial's attributes), under
    ``validation`` by trial number; :func:`tuner.study.record.read_view` puts it on the trial."""
    stored = dict(study.user_attrs.get(VALIDATION, {}))
    stored[str(result.trial)] = result.to_dict()
    study.set_user_attr(VALIDATION, stored)


def validate_study(
    space: SearchSpace,
    study: optuna.Study,
    target: Target,
    patches: PatchManager,
    *,
    top: int = 3,
    duration_s: float = DEFAULT_SOAK_S,
    repeats: int = 3,
    console: Console | None = None,
) -> list[ValidationResult]:
    """Soak the best ``top`` stable trials; store and return what each soak found."""
    console = console or Console(stderr=True)
    candidates = _candidates(study, top)
    if not candidates:
        raise TunerError(f"study {study.study_name!r} has no stable completed trial to validate")
    results: list[ValidationResult] = []
    claim = claim_host(target, study.study_name, console)  # HostBusy: nothing touched
    try:
        for record in candidates:
            config = space.config_from_params(record.params)
            launch = space.render(
                config, command=target.command, port=target.port, local=target.local
            )
            console.print(
                f"soaking trial {record.number} ({duration_s:.0f} host s)", highlight=False
            )
            patches.set_active(set(launch.patches))
            session = ServerSession(
                target.host,
                target.profile,
                launch.argv,
                {**launch.env, **target.env},
                target.port,
                f"{target.run_root.rstrip('/')}/{study.study_name}/validate-{record.number:04d}",
                stop_grace_s=target.time_scale.to_server(space.timeouts.stop_grace_s),
                stop_command=target.stop_command,
                secret_flags=launch.secret_flags,
                idle_gpus=target.gpu_idle,
                secrets=launch.secret_values(),
                api_key=launch.api_key,
            )
            try:
                with session:
                    session.wait_ready(
                        max(
                            MIN_WALL_TIMEOUT_S, target.time_scale.to_server(space.timeouts.ready_s)
                        )
                    )
                    result = _soak(space, target, session, record, duration_s, repeats)
            except ServerFailure as failure:
                result = ValidationResult(
                    record.number,
                    False,
                    0,
                    0,
                    reason=str(failure),
                    emulated=target.emulated,
                    duration_s=duration_s,
                )
            store_validation(study, result)
            label = " (emulated)" if result.emulated else ""
            verdict = (
                f"stable: {result.mean_output_throughput:,.0f} ± {result.std_output_throughput:,.0f} "
                f"output tok/s{label} at {result.concurrency} concurrent"
                if result.stable
                else f"[red]unstable[/]: {result.reason}"
            )
            console.print(f"  trial {record.number}: {verdict}", highlight=False)
            results.append(result)
    finally:
        try:
            patches.set_active(set())
        finally:
            release_host(claim, console)
    return results
