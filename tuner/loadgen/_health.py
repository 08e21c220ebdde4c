"""Is the client measuring the server, or itself? The health of one level's measurement.

During a level :class:`HealthWatch` samples this process's event-loop lag (how late a 20 ms
sleep wakes up) and its CPU time. After the level, :func:`late_share` reads from the request
log how much of the level's slot time the client lost between a request's end and its next
send (its turnaround; on an emulated server on the emulator's own clock, so the emulator's
holds are included). :func:`verdict` turns these into a cause, or None for a healthy level.

Which signals count depends on whose clock timed the level:

- this process's clock (a real server): its event-loop lag and its CPU near saturation delay
  every reading, so either makes the level ``measurement-bound``;
- the emulator's virtual clock (stamped events, ``tuner.emulator``): the client's lag no longer
  moves the stamps, only its late sends do, and those are measured directly; the emulator's own
  lag (published on ``/server_info``) costs wall time only, unless it passes the scheduler's
  longest burst hold, beyond which its wait for arrivals is no longer reliable.

On every host, a client that sends late (more than :data:`MAX_LATE_SHARE` of the slot time) is
measuring itself.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from tuner.loadgen._stream import COMPLETED, NOT_RUN, RequestLog

__all__ = [
    "ADVICE",
    "ClientHealth",
    "HealthWatch",
    "LoopLoad",
    "in_flight",
    "late_share",
    "merge_health",
    "verdict",
]

SAMPLE_S = 0.02
MAX_LOOP_LAG_P99_MS = 100.0
MAX_CPU_BUSY = 0.90
MAX_LATE_SHARE = 0.05
MAX_EMULATOR_LAG_S = 5.0  # tuner.emulator.bursts.MAX_HOLD_S

ADVICE = (
    "its figure is not the configuration's throughput: run with --client-workers N to "
    "spread the streams over N processes, fewer concurrent streams per process, or a "
    "bigger client machine"
)


@dataclass(frozen=True)
class ClientHealth:
    """How the client fared during one level.

    Attributes:
        clock: ``client`` (this process's clock timed the level) or ``emulator`` (the
            emulator's virtual-clock stamps did).
        loop_lag_p99_ms, loop_lag_max_ms: how late the event loop woke up (wall ms).
        cpu_busy: CPU time of the busiest client process over the level's wall time (1.0 is a
            whole core, the most one asyncio process can use).
        late_share: the share of the level's slot time (concurrency x duration) lost between a
            request's end and its slot's next send.
        emulator_lag_s: the most the emulator fell behind its schedule (wall s), when emulated.
        workers: client processes that ran the level.
    """

    clock: str
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    cpu_busy: float
    late_share: float = 0.0
    emulator_lag_s: float | None = None
    workers: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in asdict(self).items()}


class LoopLoad(NamedTuple):
    """The event loop's lag (p99 and max, ms) and the process's CPU busy fraction over a span."""

    lag_p99_ms: float
    lag_max_ms: float
    cpu_busy: float


class HealthWatch:
    """Samples the event loop's lag and this process's CPU time while a level runs."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None
        self._wall = self._cpu = 0.0

    def start(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        self._task = asyncio.ensure_future(self._sample())

    async def _sample(self) -> None:
        perf = time.perf_counter
        while True:
            before = perf()
            await asyncio.sleep(SAMPLE_S)
            self.lags.append(max(0.0, perf() - before - SAMPLE_S))

    async def stop(self) -> LoopLoad:
        """The event loop's lag and the process's CPU use since :meth:`start`."""
        wall = max(time.perf_counter() - self._wall, 1e-9)
        cpu = (time.process_time() - self._cpu) / wall
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        lags = sorted(self.lags)
        p99 = lags[min(len(lags) - 1, int(0.99 * len(lags)))] if lags else 0.0
        return LoopLoad(p99 * 1000.0, (lags[-1] if lags else 0.0) * 1000.0, cpu)


def late_share(log: RequestLog, concurrency: int, started: float, duration: float) -> float:
    """The share of ``concurrency x duration`` spent between a request's end (or the level's
    start, for a slot's first request) and the slot's next send; completed requests only."""
    if duration <= 0 or concurrency <= 0:
        return 0.0
    late = 0.0
    for i in log.indices(COMPLETED):
        previous = log.after[i]
        if previous < 0:
            late += max(0.0, log.start[i] - started)
        elif log.status[previous] == COMPLETED:
            late += max(0.0, log.start[i] - log.end[previous])
    return late / (concurrency * duration)


def in_flight(log: RequestLog, started: float, duration: float) -> float:
    """The requests in flight, averaged over ``[started, started + duration]``: each request
    counts from its send to its last event read."""
    if duration <= 0:
        return 0.0
    ended = started + duration
    busy = 0.0
    for i in range(len(log.start)):
        if log.status[i] == NOT_RUN or log.end[i] <= log.start[i]:  # never sent, or no end
            continue
        start, end = max(started, log.start[i]), min(ended, log.end[i])
        busy += max(0.0, end - start)
    return busy / duration


def merge_health(parts: list[ClientHealth], late: float) -> ClientHealth:
    """One level's health from its client processes' (the worst of each signal)."""
    lags = [p.emulator_lag_s for p in parts if p.emulator_lag_s is not None]
    return ClientHealth(
        clock=parts[0].clock,
        loop_lag_p99_ms=max(p.loop_lag_p99_ms for p in parts),
        loop_lag_max_ms=max(p.loop_lag_max_ms for p in parts),
        cpu_busy=max(p.cpu_busy for p in parts),
        late_share=late,
        emulator_lag_s=max(lags) if lags else None,
        workers=sum(p.workers for p in parts),
    )


def verdict(health: ClientHealth) -> str | None:
    """Why the level measured the client rather than the server, or None."""
    causes = []
    if health.late_share > MAX_LATE_SHARE:
        causes.append(f"the client sent {health.late_share:.0%} of the slot time late")
    if health.clock == "client":
        if health.loop_lag_p99_ms > MAX_LOOP_LAG_P99_MS:
            causes.append(f"the client's event loop lagged {health.loop_lag_p99_ms:.0f} ms (p99)")
        if health.cpu_busy >= MAX_CPU_BUSY:
            causes.append(f"the client used {health.cpu_busy:.0%} of a CPU core")
    if health.emulator_lag_s is not None and health.emulator_lag_s > MAX_EMULATOR_LAG_S:
        causes.append(f"the emulator fell {health.emulator_lag_s:.1f} s behind its schedule")
    return "; ".join(causes) or None
