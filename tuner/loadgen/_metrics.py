"""The figures of one load level: :class:`LevelMetrics`, on the host's time scale.

Field names follow ``sglang.bench_serving``'s output keys (``output_throughput``,
``median_ttft_ms``, ...), so a level measured by this client and one read from bench_serving's
output file compare key by key. A latency that was not measured (no request completed, or
bench_serving does not report that percentile) is None.
"""

from __future__ import annotations

import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

__all__ = ["LATENCY_KINDS", "LATENCY_STATS", "LevelMetrics"]

LATENCY_KINDS = ("ttft", "tpot", "itl", "e2e")
LATENCY_STATS = ("mean", "median", "p90", "p99")


@dataclass(frozen=True)
class LevelMetrics:
    """What one level measured. Durations are host seconds/ms, rates per host second.

    ``emulated`` is True when the server published a time scale K != 1 and every figure was
    converted through :class:`tuner.timescale.TimeScale`; ``time_scale`` holds that K.
    ``stop_reason`` is None when the level ran to its end, else why it ended early.
    ``measurement_bound`` is None when the client measured the server; otherwise it says why
    the figures measured the client instead (its lag, its CPU, its late sends, the emulator
    behind its schedule) and what to do; ``in_flight`` says how far it under-drove the server
    (the study then ranks the level's figure as a lower bound, or as measured when the
    shortfall moves it by under 1%: :mod:`tuner.study.record._figure`).
    ``client_health`` holds the signals (:class:`tuner.loadgen._health.ClientHealth`).
    ``request_rate`` is set on open-loop levels, with ``achieved_request_rate`` (the client's
    sends, first to last) and ``scheduled_request_rate`` (the rate of the arrival schedule the
    level drew, first to last: a Poisson draw of 128 arrivals is below 0.9x the rate asked for 135
    seeds of 1,000, so a level is judged against what it drew). ``repeated_prompts`` counts the
    requests whose prompt the level's run had already sent (a dataset pool that ran out).
    """

    concurrency: int
    num_requests: int
    completed: int
    failed: int
    duration_s: float
    input_tokens: int
    output_tokens: int
    output_throughput: float
    total_throughput: float
    request_throughput: float
    mean_ttft_ms: float | None = None
    median_ttft_ms: float | None = None
    p90_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_tpot_ms: float | None = None
    median_tpot_ms: float | None = None
    p90_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    mean_itl_ms: float | None = None
    median_itl_ms: float | None = None
    p90_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    mean_e2e_ms: float | None = None
    median_e2e_ms: float | None = None
    p90_e2e_ms: float | None = None
    p99_e2e_ms: float | None = None
    max_output_tokens_per_s: float = 0.0
    stop_reason: str | None = None
    emulated: bool = False
    time_scale: float = 1.0
    errors: tuple[str, ...] = ()
    measurement_bound: str | None = None
    client_health: dict[str, Any] | None = None
    # A closed-loop level: the requests the server saw in flight, averaged over the level's span
    # (``concurrency`` when the client kept every slot busy; fewer when it sent or read late).
    in_flight: float | None = None
    # How many times the level ran: more than 1 when the client fell behind and ran it again with
    # more client processes (the figures are the best-driven run's; every run cost host time).
    client_runs: int = 1
    # Open-loop levels: the request rate asked (per host second) and the one the client achieved.
    request_rate: float | None = None
    achieved_request_rate: float | None = None
    scheduled_request_rate: float | None = None
    # True when some input token counts are the client's estimates (text the server did not count).
    input_tokens_estimated: bool = False
    # Completed replies with fewer output tokens than asked: the model stopped early (a server
    # that takes no ignore_eos). Their tokens count as they came, never as the length asked.
    short_replies: int = 0
    repeated_prompts: int = 0
    # The latency percentiles a LevelSpec asked for beyond the four above (``p95_ttft_ms``).
    percentiles: dict[str, float | None] = field(default_factory=dict)

    @property
    def failed_fraction(self) -> float:
        """Failed requests as a fraction of the requests the level was to send."""
        return self.failed / self.num_requests if self.num_requests else 0.0

    def clean(self, max_failed_fraction: float = 0.01) -> bool:
        """True when the level ran to its end and at most ``max_failed_fraction`` failed."""
        return self.stop_reason is None and self.failed_fraction <= max_failed_fraction

    def rankable(self, max_failed_fraction: float = 0.01) -> bool:
        """Clean, and measured the server rather than the client: its figure may be ranked."""
        return self.clean(max_failed_fraction) and self.measurement_bound is None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict with one self-explaining key per field (``errors`` as a list)."""
        document = asdict(self)
        document["errors"] = list(self.errors)
        if not self.percentiles:  # only asked for by tuner bench: studies store none
            del document["percentiles"]
        return document

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> LevelMetrics:
        """Read back what :meth:`to_dict` wrote; unknown keys are ignored.

        Raises:
            ValueError: a required key is missing.
        """
        known = {f.name for f in fields(cls)}
        values = {key: value for key, value in document.items() if key in known}
        missing = sorted(
            f.name
            for f in fields(cls)
            if f.name not in values and f.default is MISSING and f.default_factory is MISSING
        )
        if missing:
            raise ValueError(f"level metrics lack {', '.join(missing)}")
        values["errors"] = tuple(values.get("errors") or ())
        for name, value in list(values.items()):
            if name.endswith("_ms") and value is not None:
                values[name] = _finite_or_none(value)
        return cls(**values)


def _finite_or_none(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None
