"""What a landscape's host lets the tuner see, and what one trial costs it in host seconds.

Signal variants (``--signals``), each applied to every family of :mod:`landscapes`:

- ``full``: every observation the landscape writes (the start-up lines: KV pool, captured CUDA
  graphs; the decode lines of each level: ``#running-req``, ``#queue-req``, token usage, the
  batches that ran without CUDA graphs);
- ``none``: a server whose log prints nothing the profile reads (issue 28's held-out server):
  only the client's levels;
- ``startup``: the start-up lines only (the KV pool, the captured graphs), no decode lines;
- ``metrics``: what SGLang's ``/metrics`` gauges give (``num_running_reqs``, ``num_queue_reqs``,
  ``token_usage``), sampled; no start-up lines, no CUDA-graph flag per batch;
- ``client-limited``: every signal of ``full``, read by a client that cannot always drive the
  server (issue 39): each seed draws the client's rate (1-2x the baseline's noise-free figure,
  with one client process), what each further process adds (0-100% of the first's: its cores
  may be the server's too) and a probability (0.3-0.8); a level above that rate is flagged
  ``measurement_bound`` with that probability, its figure lower by a drawn 3-15% and as many
  fewer requests in flight (:class:`ClientLimit`). The trial runner runs such a level again
  with more client processes; each re-run costs the host a level's time (:func:`rerun_levels`).

The client always measures its levels: :func:`client_latencies` gives the median time to first
token and time per output token a client would read, *modelled* from the level's running batch
(every running request gets ``tps / batch`` tokens/s; a request that waits for a place in the
batch waits whole waves of ``output_len`` tokens). A replayed table gives its own measured TPOT.

Host seconds (:func:`startup_seconds`, :func:`level_seconds`): a start-up of the calibration's
phases (83 shards at 7.5 shards/s, 2 minutes of KV allocation and warm-up, 45 s of autotune when
the flashinfer_cutlass MoE runs with its patch, 20 s of CUDA graph capture; ``calibration.md``)
and each level's requests at its throughput; a level that fails counts a minute. A replayed
row's own measured ``host_seconds`` stands when it has one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = ["rerun_levels", "ClientLimit", "Signals", "SIGNALS", "visible", "client_latencies", "startup_seconds", "level_seconds"]


class Signals(str, Enum):
    """What the host's server lets the tuner read besides the client's levels."""

    FULL = "full"
    NONE = "none"
    STARTUP = "startup"
    METRICS = "metrics"
    CLIENT_LIMITED = "client-limited"


SIGNALS = tuple(s.value for s in Signals)

_STARTUP_SERIES = ("kv_tokens", "graph_max_bs")
_VISIBLE: dict[Signals, frozenset[str] | None] = {
    Signals.FULL: None,  # everything
    Signals.NONE: frozenset(),
    Signals.STARTUP: frozenset(_STARTUP_SERIES),
    Signals.METRICS: frozenset(("running_req", "queue_req", "token_usage")),
    Signals.CLIENT_LIMITED: None,  # everything: only the client is limited
}
_METRICS_SAMPLES = 5  # /metrics scraped five times a level, where the log gives 20 decode lines

SHARDS, SHARDS_PER_S, KV_AND_WARMUP_S, AUTOTUNE_S, GRAPH_CAPTURE_S = 83, 7.5, 120.0, 45.0, 20.0
FAILED_LEVEL_S = 60.0


def visible(signals: Signals, name: str) -> bool:
    """Whether a server of this variant reports the series ``name``."""
    shown = _VISIBLE[signals]
    return shown is None or name in shown


def sampled(signals: Signals, series: list[float]) -> list[float]:
    """A level's series as this variant reads it (``/metrics``: a few scrapes, not every line)."""
    if signals is not Signals.METRICS or len(series) <= _METRICS_SAMPLES:
        return series
    step = len(series) / _METRICS_SAMPLES
    return [series[int(k * step)] for k in range(_METRICS_SAMPLES)]


def client_latencies(concurrency: int, tps: float, batch: float | None, output_len: int) -> dict[str, float]:
    """The median TTFT and TPOT (ms) a client reads at a level (modelled; see the module docstring)."""
    if not batch or tps <= 0:
        return {}
    batch = max(1.0, min(float(concurrency), batch))
    tpot = 1000.0 * batch / tps
    waves = int((concurrency / 2) // batch)  # the median request waits this many whole batches
    return {"median_tpot_ms": tpot, "median_ttft_ms": (waves * output_len + 4) * tpot}


def startup_seconds(config: dict[str, Any]) -> float:
    """A start-up's host seconds for ``config`` (the calibration's phases)."""
    seconds = SHARDS / SHARDS_PER_S + KV_AND_WARMUP_S
    if config.get("moe_runner_backend") == "flashinfer_cutlass" and config.get("autotune_gate"):
        seconds += AUTOTUNE_S
    if config.get("cuda_graph", True):
        seconds += GRAPH_CAPTURE_S
    return seconds


def level_seconds(num_requests: int, output_len: int, tps: float | None) -> float:
    """One level's host seconds: its requests' output at its throughput (a failed level: a minute)."""
    return num_requests * output_len / tps if tps else FAILED_LEVEL_S


@dataclass(frozen=True)
class ClientLimit:
    """A client that falls behind above ``rate`` output tok/s per process (``client-limited``)."""

    rate: float
    probability: float
    gain: float  # what each further client process adds, as a share of the first's rate

    @classmethod
    def drawn(cls, seed: int, baseline_value: float) -> ClientLimit:
        rng = random.Random(f"client-limit:{seed}")
        return cls(rate=rng.uniform(1.0, 2.0) * baseline_value, probability=rng.uniform(0.3, 0.8),
                   gain=rng.uniform(0.0, 1.0))

    def shortfall(self, tps: float, workers: int, rng: random.Random) -> float:
        """How much lower the client reads a level of ``tps`` with ``workers`` processes (0: it
        drove the level)."""
        if tps <= self.rate * (1.0 + self.gain * (max(1, workers) - 1)) or rng.random() >= self.probability:
            return 0.0
        return rng.uniform(0.03, 0.15)


def rerun_levels(client_runs: int | None) -> int:
    """How many times a level was run again with more client processes (``client_runs`` - 1)."""
    return max(0, int(client_runs or 1) - 1)
