"""Open-loop levels: requests sent at a request rate (Poisson or constant arrivals), not only
kept at a concurrency; the rate of the schedule a level drew, and the rate the client achieved.

A rate level still has an in-flight cap (its ``concurrency``): a server that falls behind makes
requests wait for a slot, which shows as an achieved rate below the one asked.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from tuner.loadgen._datasets import stream_seed
from tuner.loadgen._metrics import LevelMetrics
from tuner.loadgen._spec import LevelSpec
from tuner.loadgen._stream import NOT_RUN, RequestLog
from tuner.timescale import TimeScale

__all__ = ["ARRIVALS", "achieved_rate", "arrival_times", "scheduled_rate", "with_rates"]

ARRIVALS = ("poisson", "constant")


def arrival_times(spec: LevelSpec, started: float, scale: TimeScale) -> list[float] | None:
    """The server-clock send time of each request (the first at ``started``), or None for a
    closed loop. Each level of a run draws its own schedule (seeded by its place in the run's
    stream, ``[seed, 2, first_request]``), not one draw that every level rescales."""
    if spec.request_rate is None:
        return None
    mean_gap = scale.to_server(1.0 / spec.request_rate)
    if spec.arrival == "constant":
        gaps = np.full(spec.num_requests, mean_gap)
    else:
        rng = np.random.default_rng(stream_seed([spec.seed, 2], spec.first_request))
        gaps = rng.exponential(mean_gap, size=spec.num_requests)
    return (started + np.cumsum(gaps) - gaps[0]).tolist()


def scheduled_rate(spec: LevelSpec) -> float | None:
    """The rate of the schedule the level drew, in requests per host second, first arrival to
    last (as :func:`achieved_rate` measures the sends): what a client that sent every request at
    its time achieves. None for a closed loop or a single request."""
    times = arrival_times(spec, 0.0, TimeScale())
    if times is None or len(times) < 2 or times[-1] <= times[0]:
        return None
    return (len(times) - 1) / (times[-1] - times[0])


def achieved_rate(log: RequestLog, scale: TimeScale) -> float | None:
    """Requests sent per host second, from the first request's due time to the last send, on
    the client's own clock (None with fewer than two sent).

    The client's send times, not an emulator's arrival stamps: an emulator that reads its
    requests late (its process starved of CPU for a moment) stamps them late, and a time scale
    of K turns its 0.1 s into K x 0.1 host seconds, which moved the rate by a quarter. The span
    starts when the schedule said to send the first request, not when it went out: a client late
    for its first requests (its workers starting on a busy machine) catches up on the next ones,
    and a span from the first late send was shorter than the schedule's (2.4 req/s read of 2
    asked, on CI). A client that falls behind still reads lower than asked; it never reads higher.
    """
    sent = [i for i in range(log.size) if log.status[i] != NOT_RUN]
    if len(sent) < 2:
        return None
    due = [log.due[i] for i in sent if log.due[i] > 0.0]
    first = min(due) if len(due) == len(sent) else min(log.sent[i] for i in sent)
    last = max(log.sent[i] for i in sent)
    if last <= first:
        return None
    return (len(sent) - 1) / scale.duration(last - first)


def with_rates(
    metrics: LevelMetrics,
    spec: LevelSpec,
    log: RequestLog,
    scale: TimeScale,
    estimated_prompts: bool,
) -> LevelMetrics:
    """The level's metrics with the rate asked, scheduled and achieved, and whether input token
    counts are the client's estimates (text prompts the server did not count)."""
    return dataclasses.replace(
        metrics,
        request_rate=spec.request_rate,
        achieved_request_rate=achieved_rate(log, scale) if spec.request_rate is not None else None,
        scheduled_request_rate=scheduled_rate(spec),
        input_tokens_estimated=estimated_prompts and log.client_counted_inputs > 0,
    )
