"""What one load level asks of the server: :class:`LevelSpec`, validated when it is made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.errors import ConfigError

__all__ = ["APIS", "LevelSpec", "check_api"]

# The request formats the client speaks, by the name an engine profile gives as ``api``.
APIS = ("sglang", "openai", "openai-chat")


def check_api(api: str) -> str:
    """Return ``api`` if the client speaks it, else raise a one-line :class:`ConfigError`."""
    if api not in APIS:
        raise ConfigError(f"api {api!r} is unknown: use one of {', '.join(APIS)}")
    return api


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
        seed: seed of the random prompts and of the arrival times.
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
        if not isinstance(self.warmup, int) or self.warmup < 0:
            raise ConfigError(f"level warmup must be an integer >= 0, got {self.warmup!r}")
        if not self.time_limit_s > 0:
            raise ConfigError(f"level time_limit_s must be > 0 seconds, got {self.time_limit_s!r}")
        if self.request_rate is not None and not self.request_rate > 0:
            raise ConfigError(
                f"level request_rate must be > 0 requests/s, got {self.request_rate!r}: "
                "leave it unset for a closed loop"
            )
        if self.arrival not in ("poisson", "constant"):
            raise ConfigError(f"level arrival {self.arrival!r} is unknown: use poisson or constant")
        if not 0.0 <= self.max_error_fraction <= 1.0:
            raise ConfigError(
                f"level max_error_fraction must lie in [0, 1], got {self.max_error_fraction!r}"
            )

    @property
    def error_budget(self) -> int:
        """How many failed requests the level tolerates before it ends."""
        return int(self.max_error_fraction * self.num_requests)
