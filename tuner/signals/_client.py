"""What the load generator's own levels say, with no engine profile: client-level signals.

A trial's levels (:class:`tuner.loadgen.LevelMetrics`, one per concurrency) already tell a
person tuning by hand where the server stops scaling:

- **the cap binds** (:attr:`ClientSignal.CAP_BINDS`): throughput flat across the levels at or
  above a cap's value (64 running requests at most: 64 and 512 streams read about the same);
- **requests queue** (:attr:`ClientSignal.REQUESTS_QUEUE`): time to first token rising while the
  time per output token stays flat: requests wait for a place in the batch, the batch does not grow;
- **the batch saturates** (:attr:`ClientSignal.BATCH_SATURATES`): time per output token rising
  while throughput stays flat: a larger batch only makes every request slower;
- **failures above a concurrency** (:attr:`ClientSignal.FAILURES_ABOVE`): levels clean up to a
  concurrency, failing requests above it.

Each function is pure over the levels and returns typed :class:`ClientObservation` records
whose ``source`` is :attr:`tuner.signals.Source.CLIENT`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from tuner.loadgen import LevelMetrics
from tuner.signals._source import Source

__all__ = [
    "ClientSignal",
    "ClientObservation",
    "FLAT",
    "cap_binds",
    "requests_queue",
    "batch_saturates",
    "failures_above",
    "client_observations",
]

# Throughput that rose less than this share over at least twice the concurrency is flat.
FLAT = 0.10
_RISING_TTFT = 2.0  # time to first token at least this many times the lower level's: rising
_FLAT_TPOT = 1.25  # time per output token within this ratio of the lower level's: flat
_RISING_TPOT = 1.5  # ... at least this ratio: rising


class ClientSignal(str, Enum):
    """What a trial's levels say (the stored value names it in a move's signal)."""

    CAP_BINDS = "cap_binds"
    REQUESTS_QUEUE = "requests_queue"
    BATCH_SATURATES = "batch_saturates"
    FAILURES_ABOVE = "failures_above"


@dataclass(frozen=True)
class ClientObservation:
    """One signal read from a trial's levels: from concurrency ``low`` to ``high``, ``ratio``
    the figure that moved (throughput, TTFT or TPOT at ``high`` over ``low``; the failed share
    for failures), ``cap`` the cap it is about (None when none), ``source`` the client."""

    signal: ClientSignal
    low: int
    high: int
    ratio: float
    cap: int | None = None
    source: Source = Source.CLIENT

    @property
    def says(self) -> str:
        """The observation in words, its source named (``cap binds at 64: throughput flat from
        64 to 512 (client)``)."""
        span = f"from {self.low} to {self.high}"
        text = {
            ClientSignal.CAP_BINDS: f"cap binds at {self.cap}: throughput flat {span}",
            ClientSignal.REQUESTS_QUEUE: f"requests queue: time to first token x{self.ratio:.1f} {span}, "
            "time per token flat",
            ClientSignal.BATCH_SATURATES: f"batch saturates: time per token x{self.ratio:.1f} {span}, "
            "throughput flat",
            ClientSignal.FAILURES_ABOVE: f"failures above {self.low}: {self.ratio:.0%} of requests failed at {self.high}",
        }[self.signal]
        return f"{text} ({self.source.value})"


def _clean(
    levels: Iterable[LevelMetrics], max_failed_fraction: float = 0.01
) -> list[LevelMetrics]:
    """The levels that ran to their end and measured the server, by concurrency."""
    return sorted(
        (m for m in levels if m.rankable(max_failed_fraction) and m.output_throughput > 0),
        key=lambda m: m.concurrency,
    )


def _flat(low: LevelMetrics, high: LevelMetrics) -> bool:
    return (
        high.concurrency >= 2 * low.concurrency
        and high.output_throughput < (1 + FLAT) * low.output_throughput
    )


def cap_binds(levels: Iterable[LevelMetrics], cap: int | None) -> ClientObservation | None:
    """The cap binds: throughput flat from a level at or above ``cap`` (the lowest such) to the
    highest, over at least twice the concurrency."""
    if cap is None:
        return None
    above = [m for m in _clean(levels) if m.concurrency >= cap]
    low = next((m for m in above[:-1] if _flat(m, above[-1])), None)
    if low is None:
        return None
    return ClientObservation(
        ClientSignal.CAP_BINDS,
        low.concurrency,
        above[-1].concurrency,
        above[-1].output_throughput / low.output_throughput,
        cap=cap,
    )


def _latency_pair(
    levels: Iterable[LevelMetrics], name: str
) -> tuple[LevelMetrics, LevelMetrics] | None:
    """The lowest and highest clean levels that both report ``name`` (a median latency)."""
    known = [m for m in _clean(levels) if getattr(m, name) is not None and getattr(m, name) > 0]
    return (known[0], known[-1]) if len(known) >= 2 else None


def requests_queue(levels: Iterable[LevelMetrics]) -> ClientObservation | None:
    """Requests queue: median TTFT at least doubled from the lowest level to the highest while
    the median TPOT stayed within 25%."""
    pair = _latency_pair(levels, "median_ttft_ms")
    tpot = _latency_pair(levels, "median_tpot_ms")
    if pair is None or tpot is None:
        return None
    low, high = pair
    ttft = high.median_ttft_ms / low.median_ttft_ms  # type: ignore[operator]
    per_token = tpot[1].median_tpot_ms / tpot[0].median_tpot_ms  # type: ignore[operator]
    if ttft < _RISING_TTFT or per_token > _FLAT_TPOT:
        return None
    return ClientObservation(ClientSignal.REQUESTS_QUEUE, low.concurrency, high.concurrency, ttft)


def batch_saturates(levels: Iterable[LevelMetrics]) -> ClientObservation | None:
    """The batch saturates: median TPOT up at least 1.5x from the lowest level to the highest
    while throughput stayed flat."""
    pair = _latency_pair(levels, "median_tpot_ms")
    if pair is None:
        return None
    low, high = pair
    per_token = high.median_tpot_ms / low.median_tpot_ms  # type: ignore[operator]
    if per_token < _RISING_TPOT or not _flat(low, high):
        return None
    return ClientObservation(
        ClientSignal.BATCH_SATURATES, low.concurrency, high.concurrency, per_token
    )


def failures_above(
    levels: Iterable[LevelMetrics], max_failed_fraction: float = 0.01
) -> ClientObservation | None:
    """Failures appear above a concurrency: the highest clean level below the lowest level whose
    failed share exceeds ``max_failed_fraction`` (or that stopped early)."""
    ordered = sorted(levels, key=lambda m: m.concurrency)
    failing = [m for m in ordered if not m.clean(max_failed_fraction)]
    if not failing:
        return None
    first = failing[0]
    clean = [
        m for m in ordered if m.concurrency < first.concurrency and m.clean(max_failed_fraction)
    ]
    if not clean:
        return None
    return ClientObservation(
        ClientSignal.FAILURES_ABOVE,
        clean[-1].concurrency,
        first.concurrency,
        first.failed_fraction if first.stop_reason is None else 1.0,
    )


def client_observations(
    levels: Iterable[LevelMetrics], cap: int | None = None
) -> list[ClientObservation]:
    """Every signal the levels give (``cap``: the running-request cap the trial ran with)."""
    levels = list(levels)
    found = (
        cap_binds(levels, cap),
        requests_queue(levels),
        batch_saturates(levels),
        failures_above(levels),
    )
    return [o for o in found if o is not None]
