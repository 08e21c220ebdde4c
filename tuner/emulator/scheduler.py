"""Runs the batch scheduler on the wall clock, K times faster than the emulated host.

:class:`Scheduler` owns a :class:`~tuner.emulator.batch_core.BatchCore` whose durations are
already divided by the time scale. Its loop takes one action at a time and sleeps until the
action's end on an absolute clock (the emulated schedule), so sleep jitter does not accumulate:
when the loop wakes late it runs the following actions without sleeping until it has caught up
(at most ``MAX_LAG_S`` behind, plus the time it held for bursts of arrivals, see
:mod:`tuner.emulator.bursts`; beyond that the lost time is dropped). Each request's progress
goes to its :class:`Stream`, whose HTTP handler sends the events. ``$TUNER_EMULATOR_TRACE``
names a file that receives the timeline, for studying the pacing.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TextIO

from tuner.emulator.batch_core import Action, BatchCore, CoreRequest
from tuner.emulator.bursts import MAX_HOLD_S, QUIET_S, Burst
from tuner.emulator.sglang_log import SglangLog

__all__ = ["Scheduler", "Stream"]

MAX_LAG_S = 0.25
PENDING_S = 1.0  # a connection that sent nothing for this long is no longer awaited
YIELD_EVERY = 16  # actions run back to back before the loop lets the HTTP handlers in


@dataclass(eq=False)
class Stream:
    """The progress of one request, as its handler reads it."""

    request: CoreRequest
    generated: int = 0
    finished: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class Scheduler:
    """Paces an emulated engine's batches in real time.

    Args:
        core: the batch core (durations in real seconds).
        log: where the Prefill/Decode batch lines go.
        decode_log_interval: a ``Decode batch`` line every this many decode steps.
        cuda_graph: what the decode lines say about CUDA graphs.
        on_failure: called with ``crash`` or ``oom`` when the engine fails; it must not return.
        trace: where to write one line per action and per burst (real time, schedule time,
            what ran, batch and queue sizes): ``$TUNER_EMULATOR_TRACE`` names the file.
        quiet_s: the quiet period that ends a burst of arrivals.
    """

    def __init__(
        self,
        core: BatchCore,
        log: SglangLog,
        decode_log_interval: int,
        cuda_graph: Callable[[int], bool],
        on_failure: Callable[[str], None],
        trace: TextIO | None = None,
        quiet_s: float = QUIET_S,
    ) -> None:
        self.core = core
        self.log = log
        self.decode_log_interval = max(1, decode_log_interval)
        self.cuda_graph = cuda_graph
        self.on_failure = on_failure
        self.streams: dict[CoreRequest, Stream] = {}
        self.tokens_out = 0  # output tokens produced since start
        self._wake = asyncio.Event()
        self._burst: Burst | None = None
        self._last_log = (time.monotonic(), 0)
        self.trace = trace
        self.quiet_s = quiet_s
        self._pending: deque[float] = deque()  # connections that have not sent a request yet

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

    def submit(self, request: CoreRequest, follow_up: bool = False) -> Stream:
        """Queue a request; its :class:`Stream` shows its progress.

        Args:
            follow_up: it came on a connection that already carried a generation request.
        """
        now = time.monotonic()
        burst = self._burst
        if burst is not None and burst.refill and not follow_up:
            burst.superseded = True  # a new client: not the refill the burst waits for
            burst = self._burst = None
        if burst is None and not self.core.busy:
            self._burst = Burst.start(now, self.quiet_s)
        elif burst is not None:
            burst.count(now)
        stream = Stream(request)
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
        held = burst.credited(time.monotonic())
        if self.trace is not None:
            kind = "refill" if burst.refill else "start"
            gap = -1.0 if burst.first is None else burst.first - burst.opened
            self.trace.write(f"{time.monotonic():.4f} burst {kind} held={held:.4f} "
                             f"arrived={burst.arrived} expected={burst.expected} "
                             f"first_gap={gap:.4f}\n")
        return held

    def _left(self, burst: Burst, now: float) -> float:
        left = burst.left(now)
        if left <= 0 and not burst.refill and not burst.superseded and (
                now - burst.opened < MAX_HOLD_S and self._awaiting_connections(now)):
            return 0.01
        return left

    async def run(self) -> None:
        """The scheduler loop (runs until cancelled, or until the engine fails)."""
        clock = time.monotonic
        deadline = clock()  # where the emulated schedule is, in real seconds
        credit = 0.0  # held time that may be caught up, on top of MAX_LAG_S
        back_to_back = 0
        while True:
            while (burst := self._burst) is not None:
                held = await self._hold(burst)
                if burst.refill:
                    credit += held
                else:  # the schedule starts at the burst's first arrival
                    deadline, credit = burst.opened, held
            start = max(deadline, clock() - MAX_LAG_S - credit)
            action = self.core.plan(start)
            if action is None:
                self._wake.clear()
                await self._wake.wait()
                deadline, credit = clock(), 0.0
                continue
            if action.kind in ("crash", "oom"):
                self.on_failure(action.kind)
                return
            deadline = start + action.duration
            delay = deadline - clock()
            if delay > 0:
                back_to_back, credit = 0, 0.0
                await asyncio.sleep(delay)
            else:
                back_to_back += 1
                if back_to_back >= YIELD_EVERY:
                    back_to_back = 0
                    await asyncio.sleep(0)
            self._finish(action, deadline)
            if self.trace is not None:
                self.trace.write(f"{clock():.4f} {deadline:.4f} {action.kind} {len(action.batch)} "
                                 f"running={len(self.core.running)} "
                                 f"waiting={len(self.core.waiting)}\n")

    def _finish(self, action: Action, now: float) -> None:
        running_before = len(self.core.running)
        progress = self.core.apply(action, now)
        if action.kind == "prefill":
            self.tokens_out += len(action.batch)
            self._log_prefill(action)
        elif action.kind == "decode":
            self.tokens_out += running_before
            if self.core.steps % self.decode_log_interval == 0:
                self._log_decode(running_before)
        finished = 0
        for item in progress:
            finished += item.finished
            stream = self.streams.get(item.request)
            if stream is None:
                continue
            stream.generated = item.generated
            if item.finished:
                stream.finished = True
                del self.streams[item.request]
            stream.changed.set()
        unfilled = finished - len(self.core.waiting)
        if unfilled > 0:  # the queue cannot refill the freed slots: wait for the client
            if self._burst is None:
                self._burst = Burst(opened=time.monotonic(), refill=True, expected=0,
                                    quiet=self.quiet_s)
            self._burst.expected += unfilled

    def _usage(self) -> str:
        return f"{self.core.kv_used / max(1, self.core.timing.kv_tokens):.2f}"

    def _log_prefill(self, action: Action) -> None:
        cached = sum(r.cached_len for r in action.batch)
        self.log.tp(
            f"Prefill batch, #new-seq: {len(action.batch)}, #new-token: {action.tokens}, "
            f"#cached-token: {cached}, token usage: {self._usage()}, "
            f"#running-req: {len(self.core.running) - len(action.batch)}, "
            f"#queue-req: {len(self.core.waiting)}, "
        )

    def _log_decode(self, batch: int) -> None:
        now, tokens = time.monotonic(), self.tokens_out
        then, before = self._last_log
        rate = (tokens - before) / max(now - then, 1e-9)
        self._last_log = (now, tokens)
        self.log.tp(
            f"Decode batch, #running-req: {batch}, #token: {self.core.kv_used}, "
            f"token usage: {self._usage()}, cuda graph: {self.cuda_graph(batch)}, "
            f"gen throughput (token/s): {rate:.2f}, #queue-req: {len(self.core.waiting)}, "
        )
