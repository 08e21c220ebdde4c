"""Bursts of arrivals that the emulated schedule waits for, so a client's turnaround is free.

A client needs real milliseconds to answer finished streams and send new requests; time
compression turns them into K times as many emulated ones, so refilling 1,000 finished slots
would take the emulated host many seconds instead of the blink it takes on the real host. The
scheduler therefore holds its schedule while such a burst comes in and catches the held real
time up afterwards:

- a *start* burst opens when a request reaches an idle server: the schedule starts at its first
  arrival and gathers every request of the burst;
- a *refill* burst opens when requests finish and the queue cannot refill their slots: it
  gathers the requests that come back on connections that already carried a generation (a
  closed-loop client refilling its slots). A request on a new connection is a new client (a new
  level): the refill wait ends uncredited, and at an idle server a start burst begins.

A burst ends when as many requests came as it expects, when none came for a quiet period (the
first one may take ``FIRST_ARRIVAL_S_PER_REQUEST`` per expected request longer), or after
``MAX_HOLD_S``. The quiet period (:func:`quiet_for`) is ``QUIET_HOST_S`` emulated seconds,
between ``MIN_QUIET_S`` and ``QUIET_S`` real ones: long enough for a busy client's pauses at a
small K, short enough not to outlast short levels at a large K. What is credited: a start burst from its first connection (a client's clock
runs while it connects), a refill burst from its first request plus at most ``REACTION_S``
before it (a client that thinks between two levels does so on its own time).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = [
    "DECLARED_MAX_HOLD_S",
    "DECLARED_QUIET_S",
    "OPEN_LOOP",
    "open_loop",
    "FIRST_ARRIVAL_S_PER_REQUEST",
    "DeclaredLevel",
    "MAX_HOLD_S",
    "QUIET_S",
    "REACTION_S",
    "Burst",
    "quiet_for",
]


QUIET_S = 0.25  # the longest quiet that ends a burst (at K <= 20)
MIN_QUIET_S = 0.1
QUIET_HOST_S = 10.0  # a quiet costs at most this much emulated time: shorter at large K
FIRST_ARRIVAL_S_PER_REQUEST = 0.0005
MAX_HOLD_S = 20.0
# A client that declares its closed loop (``X-Tuner-Level``) is waited for until every request
# it owes has come: a burst then ends on its count, or after this long without an arrival.
DECLARED_QUIET_S = 10.0
DECLARED_MAX_HOLD_S = 300.0
REACTION_S = 0.05  # the most of a refill's wait for its first request that is credited


def quiet_for(time_scale: float) -> float:
    """The quiet period that ends a burst at time scale ``time_scale`` (real seconds)."""
    return max(MIN_QUIET_S, min(QUIET_S, QUIET_HOST_S / time_scale))


@dataclass
class Burst:
    """One burst of arrivals (times are ``time.monotonic()`` seconds).

    Attributes:
        opened: when the burst began (the first arrival of a start burst).
        refill: a refill burst (counts only follow-up requests) rather than a start burst.
        expected: how many requests end it at once (infinite for a start burst).
        arrived: requests counted so far.
        last: the last counted arrival.
        superseded: a new client came during a refill burst: its wait is not credited.
        refill_of: a start burst whose first request refilled an idle engine: when no more
            than this many come, it was the closed loop's refill (the idle wake-up applies).
    """

    opened: float
    refill: bool
    expected: float = math.inf
    quiet: float = QUIET_S
    arrived: int = 0
    last: float = 0.0
    first: float | None = None
    superseded: bool = False
    refill_of: float | None = (
        None  # a start burst at an idle engine that may be a refill of this many
    )
    max_hold: float = MAX_HOLD_S

    @classmethod
    def start(cls, now: float, quiet: float = QUIET_S) -> Burst:
        """A start burst whose first request arrived ``now``."""
        return cls(opened=now, refill=False, arrived=1, last=now, first=now, quiet=quiet)

    def credited(self, now: float) -> float:
        """The real seconds of this burst the schedule may catch up, when it ends ``now``."""
        if self.superseded:
            return 0.0
        if self.first is None:  # nobody came: the wait held up only the work already there
            return now - self.opened
        if not self.refill:
            return now - self.opened
        return now - self.first + min(self.first - self.opened, REACTION_S)

    def quiet_left(self, now: float) -> float:
        """Seconds until the burst is over for lack of arrivals."""
        if self.arrived:
            return self.quiet - (now - self.last)
        first = self.quiet + FIRST_ARRIVAL_S_PER_REQUEST * min(self.expected, 1e6)
        return first - (now - self.opened)

    def left(self, now: float) -> float:
        """Seconds the burst may still last (0 when it is over)."""
        if self.superseded or self.arrived >= self.expected:
            return 0.0
        return max(0.0, min(self.quiet_left(now), self.max_hold - (now - self.opened)))

    def count(self, now: float) -> None:
        """One more request of this burst arrived."""
        self.arrived += 1
        self.last = now
        if self.first is None:
            self.first = now


OPEN_LOOP = "open"  # ``X-Tuner-Level: <id> open``: requests sent at their own arrival times


def open_loop(header: str | None) -> bool:
    """Whether the client declared an open-loop level: its requests come at a request rate's
    arrival times, whatever finishes, so no burst is gathered and no refill waited for."""
    parts = (header or "").split()
    return len(parts) == 2 and parts[1] == OPEN_LOOP


@dataclass
class DeclaredLevel:
    """A closed-loop level its client declared (``X-Tuner-Level: <id> <concurrency> <total>``).

    The tuner's client declares its levels to an emulated server (never to a real one), so the
    schedule can wait for exactly the requests an ideal closed loop would send at once: the
    first ``min(concurrency, total)``, then one for each finished request until ``total``.
    """

    id: str
    concurrency: int
    total: int
    sent: int = 0

    @classmethod
    def parse(cls, header: str | None) -> tuple[str, int, int] | None:
        """``(id, concurrency, total)`` from the header's value, or None when absent or bad."""
        parts = (header or "").split()
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
            return None
        return parts[0], int(parts[1]), int(parts[2])

    def owed(self, finished: int) -> int:
        """Requests the client sends back for ``finished`` finished ones."""
        return max(0, min(finished, self.total - self.sent))
