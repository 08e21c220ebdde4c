"""What one load level asks of the server: :class:`LevelSpec`, validated when it is made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from tuner.engines import REQUEST_FORMATS, RequestFormat
from tuner.errors import ConfigError

__all__ = ["APIS", "LevelSpec", "check_api"]

# The request formats the client speaks (:data:`tuner.engines.RequestFormat`).
APIS = REQUEST_FORMATS


def check_api(api: str) -> RequestFormat:
    """Return ``api`` if the client speaks it, else raise a one-line :class:`ConfigError`."""
    if api not in APIS:
        raise ConfigError(f"api {api!r} is unknown: use one of {', '.join(APIS)}")
    return cast(RequestFormat, api)


@dataclass(frozen=True)
class LevelSpec:
    """One closed-loop load level.

    Attributes:
        concurrency: requests kept in flight at once (like bench_serving's ``--max-concurrency``).
        num_requests: measured requests in the level (warm-up requests come on top).
        input_len: prompt length in tokens (random prompts; a dataset gives its own lengths).
        output_len: tokens asked of every request, with ``ignore_eos``.
        time_limit_s: the level ends after this many host seconds, whatever is left.
        request_rate: requests per host second (an open loop: ``arrival`` times, capped by
            ``concurrency``); None sends the next request as soon as a slot frees.
        arrival: ``poisson`` (exponential gaps) or ``constant`` gaps, with a request rate.
        warmup: requests sent before the level and not measured; they also open the
            connections, so the level runs on warm ones.
        seed: seed of the run's request stream (a trial's number): its prompts and arrival
            times.
        first_request: where the level begins in that stream: the requests its run's earlier
            levels asked. Levels of one run at different places send different prompts (a
            dataset pool's without replacement while the pool lasts) and draw their own
            arrival schedules; warm-up prompts are never the stream's.
        dataset: where prompts come from instead of fixed-length random tokens: a request
            source of :mod:`tuner.loadgen._datasets` (read once), or a dataset file's path.
        max_error_fraction: the level ends at once when more than this fraction of
            ``num_requests`` has failed.
    """

    concurrency: int
    num_requests: int
    input_len: int
    output_len: int
    time_limit_s: float
    request_rate: float | None = None
    warmup: int = 0
    seed: int = 0
    dataset: Any = None
    max_error_fraction: float = 0.05
    arrival: str = "poisson"
    first_request: int = 0
    # Percentiles (0-100) of each latency beyond mean/median/p90/p99, as ``tuner bench
    # --metric-percentiles`` asks: LevelMetrics.percentiles holds them as ``p95_ttft_ms``.
    percentiles: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        positive_ints = {
            "concurrency": self.concurrency,
            "num_requests": self.num_requests,
            "input_len": self.input_len,
            "output_len": self.output_len,
        }
        for field, value in positive_ints.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"level {field} must be an integer >= 1, got {value!r}")
        for field, value in (("warmup", self.warmup), ("first_request", self.first_request)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"level {field} must be an integer >= 0, got {value!r}")
        if not self.time_limit_s > 0:
            raise ConfigError(f"level time_limit_s must be > 0 seconds, got {self.time_limit_s!r}")
        if self.request_rate is not None and not self.request_rate > 0:
            raise ConfigError(
                f"level request_rate must be > 0 requests/s, got {self.request_rate!r}: "
                "leave it unset for a closed loop"
            )
        if self.arrival not in ("poisson", "constant"):
            raise ConfigError(
                f"level arrival {self.arrival!r} is unknown: use poisson or constant"
            )
        if not 0.0 <= self.max_error_fraction <= 1.0:
            raise ConfigError(
                f"level max_error_fraction must lie in [0, 1], got {self.max_error_fraction!r}"
            )

    @property
    def error_budget(self) -> int:
        """How many failed requests the level tolerates before it ends."""
        return int(self.max_error_fraction * self.num_requests)
