"""The batch scheduler of the emulated server, as a pure state machine without clocks or I/O.

:class:`BatchCore` holds the waiting queue and the running batch and decides, one action at a
time, what the emulated GPUs do next, the way SGLang's scheduler does:

- ``wakeup``: work arrived at an idle scheduler; the first batch starts ``wakeup_s`` after the
  scheduler went idle, and at least ``gather_s`` after the arrival (more arrivals join it
  meanwhile). Counting from the moment it went idle makes a client's turnaround part of the
  wake-up, as it is on the real host, instead of adding to it K times over;
- ``prefill``: admit waiting requests (FIFO) while ``--max-running-requests`` and the KV pool
  allow, up to the prefill chunk budget; each admitted request gets its first token;
- ``decode``: every running request advances by one token;
- ``crash`` / ``oom``: the engine's failure modes, when the batch reaches their thresholds.

The caller runs the action for ``action.duration`` (virtual time in the simulation, real time
divided by K in the server) and then calls :meth:`BatchCore.apply`. Requests reserve
``input + output x schedule_conservativeness`` KV tokens at admission; when less than the
whole output was reserved and the pool runs out, the newest requests are retracted to the
front of the queue (SGLang's retraction) and prefilled again later.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Action", "BatchCore", "CoreRequest", "Progress"]


@dataclass(eq=False)
class CoreRequest:
    """One request inside the scheduler.

    Attributes:
        rid: the caller's identifier.
        input_len: prompt tokens.
        output_len: tokens to generate (``ignore_eos``: always all of them).
        cached_len: prompt tokens found in the prefix cache (not prefilled again).
        generated: output tokens produced so far (kept up to date by the core).
        retractions: how often the request was retracted.
    """

    rid: int
    input_len: int
    output_len: int
    cached_len: int = 0
    generated: int = 0
    retractions: int = 0
    cancelled: bool = False
    _offset: int = field(default=0, repr=False)
    _epoch: int = field(default=0, repr=False)
    _reserve: int = field(default=0, repr=False)


@dataclass(frozen=True)
class Action:
    """What the emulated GPUs do next and for how many emulated seconds."""

    kind: str  # wakeup | prefill | decode | crash | oom
    duration: float
    batch: tuple[CoreRequest, ...] = ()
    tokens: int = 0


@dataclass(frozen=True)
class Progress:
    """A request whose streamed output should be updated: ``generated`` tokens so far."""

    request: CoreRequest
    generated: int
    finished: bool


@dataclass(frozen=True)
class CoreTiming:
    """The engine's timing and limits, as the core needs them.

    Attributes:
        decode_step: seconds of one decode step for a batch of ``b`` requests.
        prefill: seconds to prefill ``tokens`` tokens in ``chunks`` chunks.
        wakeup_s: idle wake-up time, from the moment the scheduler went idle.
        gather_s: the least time between the first arrival and the first batch.
        kv_tokens: size of the KV pool.
        max_running: cap on running requests.
        chunk_tokens: prefill budget of one prefill batch.
        reserve_ratio: share of the output reserved in the KV pool at admission.
        crash_batch: a prefill that brings the batch to this size crashes the scheduler.
        oom_batch: a decode step of this many requests runs out of memory.
        leak_batch: decode with this many requests or more in the engine (running and waiting)
            slowly leaks memory (a soak failure) ...
        leak_after_s: ... and runs out of it after this many seconds of such decode in all.
        retract_s: seconds added to a decode step for each request retracted before it.
    """

    decode_step: Callable[[int], float]
    prefill: Callable[[int, int], float]
    wakeup_s: float
    gather_s: float
    kv_tokens: int
    max_running: int
    chunk_tokens: int
    reserve_ratio: float = 1.0
    crash_batch: int | None = None
    oom_batch: int | None = None
    retract_s: float = 0.0
    leak_batch: int | None = None
    leak_after_s: float = 0.0


class BatchCore:
    """SGLang-like continuous batching over a :class:`CoreTiming`.

    Args:
        timing: the engine's timing and limits.
        notify_every: report a request's progress every this many tokens (``--stream-interval``);
            its first token and its last are always reported.
    """

    def __init__(self, timing: CoreTiming, notify_every: int = 1) -> None:
        self.timing = timing
        self.notify_every = max(1, notify_every)
        self.waiting: deque[CoreRequest] = deque()
        self.running: list[CoreRequest] = []
        self.steps = 0  # decode steps so far
        self.kv_used = 0  # tokens held by running requests
        self._remaining = 0  # output tokens the running requests still have to produce
        self._idle = True
        self._idle_since: float | None = None
        self._wakeups: dict[int, list[tuple[CoreRequest, int]]] = {}
        self._leaked_s = 0.0  # seconds of decode at or above timing.leak_batch so far

    # -- queue ----------------------------------------------------------------------------------

    def submit(self, request: CoreRequest) -> None:
        """A request arrives; it waits until a prefill admits it."""
        self.waiting.append(request)

    def cancel(self, request: CoreRequest) -> None:
        """Drop a request (its client went away); its KV tokens are freed."""
        request.cancelled = True
        if request in self.waiting:
            self.waiting.remove(request)
        elif request in self.running:
            self._release(request)
            self.running.remove(request)

    def forget_idle(self) -> None:
        """The next batch waits only for the gathering time, not for the idle wake-up."""
        self._idle_since = None

    @property
    def busy(self) -> bool:
        """Work is waiting or running."""
        return bool(self.waiting or self.running)

    @property
    def kv_reserved(self) -> int:
        """Tokens held now plus the share of the remaining output reserved for later."""
        return self.kv_used + int(self._remaining * self.timing.reserve_ratio)

    # -- planning -------------------------------------------------------------------------------

    def plan(self, now: float = 0.0) -> Action | None:
        """The next action, or None when there is nothing to do.

        Args:
            now: the caller's clock (only differences matter), for the idle wake-up.
        """
        if not self.busy:
            return None
        if self._idle and self.waiting:
            timing = self.timing
            ready = now + timing.gather_s
            if self._idle_since is not None:
                ready = max(ready, self._idle_since + timing.wakeup_s)
            return Action("wakeup", ready - now)
        batch, tokens, chunks = self._admissible()
        if batch:
            crash = self.timing.crash_batch
            if crash is not None and len(self.running) + len(batch) >= crash:
                return Action("crash", 0.0, tuple(batch))
            return Action("prefill", self.timing.prefill(tokens, chunks), tuple(batch), tokens)
        if not self.running:
            return None  # the head of the queue does not fit in an empty pool
        retracted = self._retract_for_next_step()
        size = len(self.running)
        if self.timing.oom_batch is not None and size >= self.timing.oom_batch:
            return Action("oom", 0.0)
        if self._leaking(size + len(self.waiting)) and self._leaked_s >= self.timing.leak_after_s:
            return Action("oom", 0.0)
        return Action("decode", self.timing.decode_step(size) + retracted * self.timing.retract_s)

    def _reserve(self, request: CoreRequest) -> int:
        rest = request.output_len - request.generated
        return request.input_len + request.generated + int(rest * self.timing.reserve_ratio)

    def _admissible(self) -> tuple[list[CoreRequest], int, int]:
        timing = self.timing
        batch: list[CoreRequest] = []
        tokens = 0
        room = timing.kv_tokens - self.kv_reserved
        slots = timing.max_running - len(self.running)
        for request in self.waiting:
            if len(batch) >= slots:
                break
            need = self._reserve(request)
            prefill = max(1, request.input_len + request.generated - request.cached_len)
            if need > room or (batch and tokens + prefill > timing.chunk_tokens):
                break
            batch.append(request)
            tokens += prefill
            room -= need
        chunks = max(1, -(-tokens // timing.chunk_tokens))
        return batch, tokens, chunks

    def _retract_for_next_step(self) -> int:
        retracted = 0
        while len(self.running) > 1 and self.kv_used + len(self.running) > self.timing.kv_tokens:
            newest = self.running.pop()
            self._release(newest)
            newest.retractions += 1
            self.waiting.appendleft(newest)
            retracted += 1
        return retracted

    # -- applying -------------------------------------------------------------------------------

    def _leaking(self, size: int) -> bool:
        return self.timing.leak_batch is not None and size >= self.timing.leak_batch

    def apply(self, action: Action, now: float = 0.0) -> list[Progress]:
        """Finish ``action`` at ``now``: update the state, return the requests whose output moved."""
        if action.kind == "wakeup":
            self._idle = False
            return []
        if action.kind == "prefill":
            progress = self._apply_prefill(action.batch)
        elif action.kind == "decode":
            if self._leaking(len(self.running) + len(self.waiting)):
                self._leaked_s += action.duration
            progress = self._apply_decode()
        else:
            raise ValueError(f"action {action.kind!r} cannot be applied: the engine failed")
        if self._idle:
            self._idle_since = now
        return progress

    def _apply_prefill(self, batch: tuple[CoreRequest, ...]) -> list[Progress]:
        progress = []
        for request in batch:
            if request.cancelled:
                continue  # dropped while its prefill ran
            self.waiting.remove(request)
            request.generated += 1
            request._epoch += 1
            request._offset = self.steps - request.generated
            self.running.append(request)
            self.kv_used += request.input_len + request.generated
            self._remaining += request.output_len - request.generated
            finished = request.generated >= request.output_len
            progress.append(Progress(request, request.generated, finished))
            if finished:
                self._release(request)
                self.running.remove(request)
            else:
                self._schedule_notice(request)
        self._idle = not self.busy
        return progress

    def _apply_decode(self) -> list[Progress]:
        self.steps += 1
        self.kv_used += len(self.running)
        self._remaining -= len(self.running)
        progress = []
        finished_any = False
        for request, epoch in self._wakeups.pop(self.steps, ()):
            if epoch != request._epoch:
                continue  # retracted since
            request.generated = self.steps - request._offset
            finished = request.generated >= request.output_len
            progress.append(Progress(request, request.generated, finished))
            if finished:
                self._release(request)
                request._epoch += 1
                finished_any = True
            else:
                self._schedule_notice(request)
        if finished_any:
            self.running = [r for r in self.running if r.generated < r.output_len]
        self._idle = not self.busy
        return progress

    def _schedule_notice(self, request: CoreRequest) -> None:
        every = self.notify_every
        target = min(request.output_len, (request.generated // every + 1) * every)
        step = request._offset + target
        self._wakeups.setdefault(step, []).append((request, request._epoch))

    def _release(self, request: CoreRequest) -> None:
        request.generated = max(request.generated, self.steps - request._offset)
        request.generated = min(request.generated, request.output_len)
        request._epoch += 1
        self.kv_used -= request.input_len + request.generated
        self._remaining -= request.output_len - request.generated
