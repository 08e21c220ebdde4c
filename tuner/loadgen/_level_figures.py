"""A level's figures from its (merged) share result: the aggregate, the rates achieved, and the
client's verdict on its own measurement (``measurement_bound``)."""

from __future__ import annotations

from dataclasses import replace

from tuner.loadgen._aggregate import aggregate
from tuner.loadgen._health import ADVICE, ClientHealth, in_flight, late_share, verdict
from tuner.loadgen._metrics import LevelMetrics
from tuner.loadgen._open_loop import with_rates
from tuner.loadgen._share import ShareResult
from tuner.loadgen._spec import LevelSpec
from tuner.loadgen._stream import CONNECT_TIMED_OUT, RequestLog
from tuner.timescale import TimeScale

__all__ = ["empty_metrics", "level_metrics"]


def empty_metrics(spec: LevelSpec, scale: TimeScale, reason: str) -> LevelMetrics:
    """A level that measured nothing, for ``reason`` (the server did not answer, ...)."""
    return aggregate(
        RequestLog(spec.num_requests),
        concurrency=spec.concurrency,
        started=0.0,
        duration=0.0,
        scale=scale,
        stop_reason=reason,
        errors=(reason,),
    )


def level_metrics(
    spec: LevelSpec, scale: TimeScale, result: ShareResult, health: ClientHealth | None
) -> LevelMetrics:
    """The level's figures from its (merged) result, with its measurement verdict."""
    metrics = aggregate(
        result.log,
        concurrency=spec.concurrency,
        started=result.started,
        duration=result.ended - result.started,
        scale=scale,
        stop_reason=result.stop_reason,
        errors=result.errors,
        percentiles=spec.percentiles,
    )
    metrics = with_rates(metrics, spec, result.log, scale, result.estimated)
    metrics = replace(metrics, repeated_prompts=result.repeated_prompts)
    if health is None:
        return metrics
    seen = None
    if spec.request_rate is None:  # a closed loop: a slot's idle time is the client's
        span = result.ended - result.started
        late = late_share(result.log, spec.concurrency, result.started, span)
        health = replace(health, late_share=late)
        # A request counts from its send to its last event read (on an emulated server, its
        # stamps): a loop that read late counts a little more than the server saw.
        seen = round(min(float(spec.concurrency), in_flight(result.log, result.started, span)), 3)
    cause = verdict(health)
    if health.clock != "client" and any(CONNECT_TIMED_OUT in error for error in result.errors):
        # Connects that timed out while the client itself lagged: its own doing (a starved
        # machine opening many connections at once), on the emulator's clock too (on the
        # client's, verdict already counts that lag).
        lagged = verdict(replace(health, clock="client", late_share=0.0, emulator_lag_s=None))
        if lagged:
            cause = "; ".join(filter(None, [cause, f"connects timed out while {lagged}"]))
    return replace(
        metrics,
        measurement_bound=f"{cause}: {ADVICE}" if cause else None,
        client_health=health.to_dict(),
        in_flight=seen,
    )
