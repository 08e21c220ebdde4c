"""Runs the batch scheduler on a virtual clock, paced K times faster than the emulated host.

:class:`Scheduler` owns a :class:`~tuner.emulator.batch_core.BatchCore` whose durations are
already divided by the time scale. The emulated time (:attr:`Scheduler.virtual`, server
seconds) advances by exactly the durations of the actions taken, and by real time only while
the engine is idle; it never depends on how fast the CPU runs the loop. The loop paces the
virtual clock against the wall clock (it sleeps until an action's end when it is ahead) and,
when the machine is too busy, simply runs late: nothing is dropped, and how far behind the
schedule it ran is published (:meth:`Scheduler.lag_report`, on ``/server_info``). While a burst
of arrivals comes in (:mod:`tuner.emulator.bursts`) the virtual clock stands still, so a
client's turnaround costs no emulated time.

Each request's arrival and each progress notice are stamped with the virtual time; the HTTP
handler sends the stamps with the events (``emulator_clock``), and the tuner's client measures
an emulated level on them, so that its own CPU lag cannot distort the figures.
``$TUNER_EMULATOR_TRACE`` names a file that receives the timeline, for studying the pacing.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from tuner.emulator.batch_core import Action, BatchCore, CoreRequest
from tuner.emulator.batch_log import BatchLog
from tuner.emulator.bursts import (
    DECLARED_MAX_HOLD_S,
    DECLARED_QUIET_S,
    MAX_HOLD_S,
    QUIET_S,
    Burst,
    DeclaredLevel,
)

__all__ = ["Scheduler", "Stream"]

PENDING_S = 1.0  # a connection that sent nothing for this long is no longer awaited
YIELD_EVERY = 16  # actions run back to back before the loop lets the HTTP handlers in


@dataclass(eq=False)
class Stream:
    """The progress of one request, as its handler reads it."""

    request: CoreRequest
    generated: int = 0
    finished: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    arrived: float = 0.0  # virtual time of the arrival (server seconds)
    level: str | None = None  # the declared level it belongs to
    stamps: dict[int, float] = field(default_factory=dict)  # token count -> virtual time

    def stamp(self, count: int) -> float:
        """The virtual time at which the output reached ``count`` tokens (or the latest)."""
        stamp = self.stamps.get(count)
        if stamp is None:
            stamp = max(self.stamps.values(), default=self.arrived)
        return stamp


class Scheduler:
    """Paces an emulated engine's batches in real time.

    Args:
        core: the batch core (durations in real seconds).
        batch_log: the batch lines and gauges it reports each batch to.
        on_failure: called with ``crash`` or ``oom`` when the engine fails; it must not return.
        trace: where to write one line per action and per burst (real time, schedule time,
            what ran, batch and queue sizes): ``$TUNER_EMULATOR_TRACE`` names the file.
        quiet_s: the quiet period that ends a burst of arrivals.
    """

    def __init__(
        self,
        core: BatchCore,
        batch_log: BatchLog,
        on_failure: Callable[[str], None],
        trace: TextIO | None = None,
        quiet_s: float = QUIET_S,
    ) -> None:
        self.core = core
        self.batch_log = batch_log
        self.on_failure = on_failure
        self.streams: dict[CoreRequest, Stream] = {}
        self.tokens_out = 0  # output tokens produced since start
        self._wake = asyncio.Event()
        self._burst: Burst | None = None
        self.trace = trace
        self.quiet_s = quiet_s
        self._pending: deque[float] = deque()  # connections that have not sent a request yet
        self.virtual = 0.0  # the emulated clock, server seconds (host seconds / K)
        self._anchor = (time.monotonic(), 0.0)  # (wall, virtual) that the pacing counts from
        self._idle_since: tuple[float, float] | None = (time.monotonic(), 0.0)
        self.lag_s = 0.0  # how far behind its schedule the loop is now (wall seconds)
        self.peak_lag_s = 0.0  # the most it fell behind since the engine last became busy
        self.busy_periods = 0
        # False once a refill wait went unanswered (the client's level is ending): finished
        # requests are then not waited for until a follow-up request comes again.
        self._refills_expected = True
        self._level: DeclaredLevel | None = None  # the client's declared closed loop, if any

    def connection_opened(self) -> None:
        """A client connected; its first request is awaited (a start burst waits for it)."""
        self._pending.append(time.monotonic())

    def connection_used(self) -> None:
        """A connection sent its first request."""
        if self._pending:
            self._pending.popleft()

    def _awaiting_connections(self, now: float) -> bool:
        while self._pending and now - self._pending[0] > PENDING_S:
            self._pending.popleft()
        return bool(self._pending)

    def virtual_now(self) -> float:
        """The virtual time now: frozen during a burst, running with the wall clock when idle,
        and never beyond the end of the action in progress."""
        if self._burst is not None:
            return self.virtual
        wall = time.monotonic()
        if self._idle_since is not None:
            since_wall, since_virtual = self._idle_since
            return since_virtual + (wall - since_wall)
        anchor_wall, anchor_virtual = self._anchor
        return min(self.virtual, anchor_virtual + (wall - anchor_wall))

    def lag_report(self) -> dict[str, float]:
        """How far behind its schedule the scheduler runs, in wall seconds (for /server_info)."""
        return {
            "virtual_s": round(self.virtual_now(), 6),
            "lag_s": round(self.lag_s, 4),
            "peak_lag_s": round(self.peak_lag_s, 4),
            "busy_periods": self.busy_periods,
        }

    def _submit_declared(self, request: CoreRequest, level: tuple[str, int, int]) -> Stream:
        """A request of a declared closed loop: a new level starts a burst of its first
        requests; a known level's request counts towards the burst that waits for it."""
        now = time.monotonic()
        level_id, concurrency, total = level
        if self._level is None or self._level.id != level_id:
            if self._burst is not None:
                self._burst.superseded = True
            self._level = DeclaredLevel(level_id, concurrency, total)
            self._wake_from_idle()
            self._burst = Burst.start(now, DECLARED_QUIET_S)
            self._burst.expected = min(concurrency, total)
            self._burst.max_hold = DECLARED_MAX_HOLD_S
        elif self._burst is not None:
            self._burst.count(now)
        self._level.sent += 1
        stream = Stream(request, arrived=self.virtual_now(), level=level_id)
        self.streams[request] = stream
        self.core.submit(request)
        self._wake.set()
        return stream

    def _submit_open_loop(self, request: CoreRequest) -> Stream:
        """A request of a declared open loop: it arrives at its own time on the running virtual
        clock; no burst is gathered for it and no refill waited for (a burst in progress, the
        warm-up's, ends)."""
        if self._burst is not None:
            self._burst.superseded = True
            self._burst = None
        self._level = None
        self._refills_expected = False
        if not self.core.busy:
            self._wake_from_idle()
        stream = Stream(request, arrived=self.virtual_now())
        self.streams[request] = stream
        self.core.submit(request)
        self._wake.set()
        return stream

    def submit(
        self,
        request: CoreRequest,
        follow_up: bool = False,
        level: tuple[str, int, int] | None = None,
        open_loop: bool = False,
    ) -> Stream:
        """Queue a request; its :class:`Stream` shows its progress.

        Args:
            follow_up: it came on a connection that already carried a generation request.
            level: ``(id, concurrency, total)`` of the closed loop its client declared
                (:class:`~tuner.emulator.bursts.DeclaredLevel`); None for other clients,
                whose bursts are guessed from their arrivals.
            open_loop: its client declared an open-loop level (requests at a request rate).
        """
        if open_loop:
            return self._submit_open_loop(request)
        if level is not None:
            return self._submit_declared(request, level)
        now = time.monotonic()
        burst = self._burst
        refill_of: float | None = None
        if burst is not None and burst.refill and (not follow_up or not self.core.busy):
            # A new client, or work for an idle engine (a level after its warm-up): not the
            # refill the burst waits for, but the start of a new burst.
            burst.superseded = True
            refill_of = burst.expected if follow_up else None
            burst = self._burst = None
        if follow_up:
            self._refills_expected = True
        if burst is None and not self.core.busy:
            self._wake_from_idle()
            self._refills_expected = True
            self._burst = Burst.start(now, self.quiet_s)
            self._burst.refill_of = refill_of
        elif burst is not None:
            burst.count(now)
        stream = Stream(request, arrived=self.virtual_now())
        self.streams[request] = stream
        self.core.submit(request)
        self._wake.set()
        return stream

    def cancel(self, stream: Stream) -> None:
        """The client went away: drop its request and free its KV tokens."""
        if self.streams.pop(stream.request, None) is not None and not stream.finished:
            self.core.cancel(stream.request)

    async def _hold(self, burst: Burst) -> float:
        """Wait while ``burst`` lasts; the real seconds held, or 0 when it was superseded.

        A start burst also lasts while fresh connections have not sent their request yet (a
        client opening many connections at once), up to ``MAX_HOLD_S``.
        """
        while (left := self._left(burst, time.monotonic())) > 0:
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), max(left, 0.001))
            except TimeoutError:
                pass
        if self._burst is burst:
            self._burst = None
        if burst.refill and not burst.arrived and not burst.superseded:
            self._refills_expected = False
        if (
            not burst.refill
            and (burst.refill_of is None or burst.arrived > burst.refill_of)
            and not burst.superseded
        ):
            # More came than had finished: a new level, not a closed loop's refill; it starts
            # after the gathering time, without the idle wake-up (as in predict_throughput).
            self.core.forget_idle()
        held = burst.credited(time.monotonic())
        if self.trace is not None:
            kind = "refill" if burst.refill else "start"
            gap = -1.0 if burst.first is None else burst.first - burst.opened
            self.trace.write(
                f"{time.monotonic():.4f} burst {kind} held={held:.4f} "
                f"arrived={burst.arrived} expected={burst.expected} "
                f"first_gap={gap:.4f}\n"
            )
        return held

    def _left(self, burst: Burst, now: float) -> float:
        left = burst.left(now)
        if (
            left <= 0
            and not burst.refill
            and not burst.superseded
            and (now - burst.opened < MAX_HOLD_S and self._awaiting_connections(now))
        ):
            return 0.01
        return left

    def _wake_from_idle(self) -> None:
        """Work arrived at an idle engine: the idle time passed on the virtual clock too."""
        if self._idle_since is not None:
            since_wall, since_virtual = self._idle_since
            self.virtual = max(self.virtual, since_virtual + (time.monotonic() - since_wall))
            self._idle_since = None
            self.peak_lag_s = self.lag_s = 0.0
            self.busy_periods += 1
        self._anchor = (time.monotonic(), self.virtual)

    async def run(self) -> None:
        """The scheduler loop (runs until cancelled, or until the engine fails)."""
        clock = time.monotonic
        back_to_back = 0
        while True:
            if self._burst is not None:
                self._wake_from_idle()
                while (burst := self._burst) is not None:
                    await self._hold(burst)  # the virtual clock stands still meanwhile
                self._anchor = (clock(), self.virtual)
            action = self.core.plan(self.virtual)
            if action is None:
                self._idle_since = (clock(), self.virtual)
                self.lag_s = 0.0
                self._wake.clear()
                await self._wake.wait()
                self._wake_from_idle()
                continue
            if self._idle_since is not None:
                self._wake_from_idle()
            if action.kind in ("crash", "oom"):
                self.on_failure(action.kind)
                return
            self.virtual += action.duration
            anchor_wall, anchor_virtual = self._anchor
            delay = anchor_wall + (self.virtual - anchor_virtual) - clock()
            if delay > 0:
                back_to_back = 0
                self.lag_s = 0.0
                await asyncio.sleep(delay)
            else:
                self.lag_s = -delay
                self.peak_lag_s = max(self.peak_lag_s, self.lag_s)
                back_to_back += 1
                if back_to_back >= YIELD_EVERY:
                    back_to_back = 0
                    await asyncio.sleep(0)
            self._finish(action, self.virtual)
            if self.trace is not None:
                self.trace.write(
                    f"{clock():.4f} {self.virtual:.6f} {action.kind} "
                    f"{len(action.batch)} running={len(self.core.running)} "
                    f"waiting={len(self.core.waiting)} lag={self.lag_s:.4f}\n"
                )

    def _finish(self, action: Action, now: float) -> None:
        running_before = len(self.core.running)
        progress = self.core.apply(action, now)
        if action.kind == "prefill":
            self.tokens_out += len(action.batch)
            self.batch_log.prefill(self.core, action)
        elif action.kind == "decode":
            self.tokens_out += running_before
            self.batch_log.decode(self.core, running_before, self.tokens_out)
        finished = declared = 0
        for item in progress:
            finished += item.finished
            stream = self.streams.get(item.request)
            if stream is None:
                continue
            if item.finished and self._level is not None and stream.level == self._level.id:
                declared += 1
            stream.generated = item.generated
            stream.stamps[item.generated] = now
            if item.finished:
                stream.finished = True
                del self.streams[item.request]
            stream.changed.set()
        if declared:
            owed = self._level.owed(declared) if self._level is not None else 0
            if owed:  # the declared closed loop sends these at once: wait for them
                if self._burst is None:
                    self._burst = Burst(
                        opened=time.monotonic(),
                        refill=True,
                        expected=0,
                        quiet=DECLARED_QUIET_S,
                        max_hold=DECLARED_MAX_HOLD_S,
                    )
                self._burst.expected += owed
            return
        unfilled = finished - len(self.core.waiting)
        if unfilled > 0 and self._refills_expected:  # wait for the client to refill them
            if self._burst is None:
                self._burst = Burst(
                    opened=time.monotonic(), refill=True, expected=0, quiet=self.quiet_s
                )
            self._burst.expected += unfilled
