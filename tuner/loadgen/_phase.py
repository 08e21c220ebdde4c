"""Sending a list of requests with bounded concurrency, and deciding when to stop.

:class:`Phase` holds the running count of a phase (warm-up or measured level) and the stop
rules; :func:`run_phase` runs the workers and supervises them until they finish or a stop rule
fires, then cancels what is still in flight.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import aiohttp

from tuner.loadgen._apis import ApiFormat
from tuner.loadgen._stream import JSON_HEADERS, RequestLog, stream_request

__all__ = ["Phase", "run_phase"]

POLL_INTERVAL_S = 0.1
MAX_DISTINCT_ERRORS = 5


class Phase:
    """The state of one phase: which request is next, failures, and why it stopped.

    Args:
        log: where requests are recorded; its size is the number of requests to send.
        concurrency: requests in flight at most.
        budget: failed requests tolerated; one more ends the phase.
    """

    def __init__(self, log: RequestLog, concurrency: int, budget: int) -> None:
        self.log = log
        self.concurrency = concurrency
        self.budget = budget
        self.next_index = 0
        self.finished = 0
        self.failed = 0
        self.lost_in_a_row = 0
        self.errors: list[str] = []
        self.stop_reason: str | None = None
        self.wake = asyncio.Event()

    def stop(self, reason: str) -> None:
        """End the phase with ``reason`` (the first reason given is kept)."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self.wake.set()

    def record_failure(self, error: str, connection_lost: bool) -> None:
        """Count a failed request and stop when the server is gone or the budget is spent."""
        self.failed += 1
        if error not in self.errors and len(self.errors) < MAX_DISTINCT_ERRORS:
            self.errors.append(error)
        self.lost_in_a_row = self.lost_in_a_row + 1 if connection_lost else 0
        gone = connection_lost and self.lost_in_a_row >= min(self.concurrency, self.log.size)
        if self.failed > self.budget or gone:
            what = "server stopped answering" if connection_lost else "error budget passed"
            self.stop(
                f"{what}: {self.failed} of {self.log.size} requests failed "
                f"(budget {self.budget}); last error: {error}"
            )


async def _supervise(
    phase: Phase,
    deadline: float,
    stop_check: Callable[[], str | None] | None,
    time_limit_s: float | None,
    virtual_limit: float | None = None,
) -> None:
    """Return when the workers are done or a stop rule fired (``phase.stop_reason``).

    ``virtual_limit``: the level's time limit on an emulated server's clock (its stamps)."""
    poll: asyncio.Future[str | None] | None = None
    try:
        log = phase.log
        while phase.stop_reason is None and phase.finished < phase.concurrency:
            now = time.perf_counter()
            virtual = log.last_stamp - log.first_stamp if log.first_stamp is not None else 0.0
            if now >= deadline or (virtual_limit is not None and virtual > virtual_limit):
                limit = f"{time_limit_s:g} s" if time_limit_s is not None else "its time"
                finished = phase.log.size - phase.log.status.count(0)
                phase.stop(
                    f"time limit of {limit} reached with {finished} of "
                    f"{phase.log.size} requests finished"
                )
                break
            if stop_check is not None:
                if poll is not None and poll.done():
                    reason, poll = poll.result(), None
                    if reason:
                        phase.stop(reason)
                        break
                if poll is None:
                    poll = asyncio.ensure_future(asyncio.to_thread(stop_check))
            try:
                await asyncio.wait_for(phase.wake.wait(), min(POLL_INTERVAL_S, deadline - now))
            except TimeoutError:
                pass
    finally:
        if poll is not None and not poll.done():
            poll.cancel()


async def run_phase(
    session: aiohttp.ClientSession,
    url: str,
    fmt: ApiFormat,
    phase: Phase,
    bodies: list[bytes],
    lengths: list[int],
    deadline: float,
    arrivals: list[float] | None,
    stop_check: Callable[[], str | None] | None,
    *,
    time_limit_s: float | None = None,
    stamped: bool = False,
    headers: dict[str, str] = JSON_HEADERS,
    virtual_limit: float | None = None,
) -> float:
    """Send ``bodies`` under ``phase``'s rules. Returns the perf_counter time it ended.

    ``stamped``: time requests on the emulator's clock stamps (see :func:`stream_request`);
    ``headers``: of every request. ``virtual_limit``: the time limit on the stamps' clock.
    """

    async def send_requests() -> None:
        """Send the phase's next request, one after another, until none is left or it stops."""
        log = phase.log
        previous = -1
        try:
            while phase.stop_reason is None and phase.next_index < log.size:
                index = phase.next_index
                phase.next_index += 1
                log.after[index], previous = previous, index
                if arrivals is not None:
                    log.due[index] = arrivals[index]
                    delay = arrivals[index] - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                outcome = await stream_request(
                    session, url, bodies[index], fmt, log, index, lengths[index], stamped, headers
                )
                if outcome.ok:
                    phase.lost_in_a_row = 0
                else:
                    phase.record_failure(outcome.error or "failed", outcome.connection_lost)
                # Let the streams whose data has already arrived be read (and their clocks read)
                # before this worker spends its time sending the next request.
                await asyncio.sleep(0)
        finally:
            phase.finished += 1
            if phase.finished == phase.concurrency:
                phase.wake.set()

    phase.concurrency = min(phase.concurrency, len(bodies))
    workers = [asyncio.ensure_future(send_requests()) for _ in range(phase.concurrency)]
    try:
        await _supervise(phase, deadline, stop_check, time_limit_s, virtual_limit)
    finally:
        ended = time.perf_counter()
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
    return ended
