"""Numbers a server reported during a trial, by phase, and the figures of one level made of them.

A :class:`Series` keeps every number one source gave (the server log, ``/metrics``), by the
session's phase (``starting``, ``probe``, ``level-<c>``) and series name (``running_req``,
``queue_req``, ``token_usage``, ``kv_tokens``, ...: the names of the engine profile's
``log_observations`` and ``metrics_observations``). :func:`level_figures` turns one level's
series into the flat figures stored on the trial, whichever source gave them:

- ``kv_tokens``: the KV pool's size (the log's start-up line, or the pool gauge);
- ``graph_max_bs``: the largest batch the CUDA graphs captured at start (log only);
- ``running_req_max``: the most requests running at once; ``running_req_at_cap_fraction``: the
  share of the level's samples with requests running that were at the running-request cap (the
  cap flag's value, else the level's own maximum when it stayed below the concurrency);
- ``queue_req_max``, ``queue_growing`` (1 when the queue was longer in the last third of the
  level than in the first);
- ``token_usage_max``: the KV pool's highest use (0-1);
- ``spec_accept_len``, ``spec_accept_rate``: speculative decoding's mean accepted tokens a round
  and accepted share of the draft tokens over the level;
- ``eager_fraction``: the share of the level's decode batches that ran without CUDA graphs (the
  batch above the captured size): from the log, the decode lines of the ``eager_running_req``
  pattern among all; from ``/metrics``, the growth of the ``eager_passes`` counter over that of
  ``decode_passes``.

A figure no sample gave is absent, never 0.
"""

from __future__ import annotations

import threading
from statistics import fmean

__all__ = ["Series", "SERIES_NAMES", "STARTUP_SERIES", "level_figures"]

STARTUP_SERIES = ("kv_tokens", "graph_max_bs")  # the last value of any phase; the others per level
# Every series name level_figures reads (a profile's metrics_observations name one of them).
SERIES_NAMES = (
    *STARTUP_SERIES,
    "running_req",
    "eager_running_req",
    "queue_req",
    "token_usage",
    "decode_passes",
    "eager_passes",
    "spec_accept_len",
    "spec_accept_rate",
)


class Series:
    """The numbers one source gave, by (phase, name), in the order they came; thread-safe."""

    def __init__(self, names: object) -> None:
        self._names = set(names)  # type: ignore[call-overload]
        self._series: dict[tuple[str, str], list[float]] = {}
        self._lock = threading.Lock()

    def add(self, phase: str, name: str, value: float) -> None:
        """Record one value of ``name`` seen during ``phase``."""
        with self._lock:
            self._series.setdefault((phase, name), []).append(value)

    def series(self, phase: str, name: str) -> list[float]:
        """The values of ``name`` seen during ``phase``, in order."""
        with self._lock:
            return list(self._series.get((phase, name), []))

    def watches(self, name: str) -> bool:
        """Whether this source is told where to read ``name`` (the engine profile names it)."""
        return name in self._names

    def last(self, name: str) -> float | None:
        """The last value of ``name`` in any phase (e.g. ``kv_tokens``)."""
        with self._lock:
            found = [
                values[-1]
                for (_, series), values in self._series.items()
                if series == name and values
            ]
        return found[-1] if found else None


def _thirds_growing(values: list[float]) -> bool:
    if len(values) < 3:
        return False
    third = len(values) // 3
    return fmean(values[-third:]) > fmean(values[:third]) + 1.0


def _growth(values: list[float]) -> float | None:
    return values[-1] - values[0] if len(values) >= 2 else None


def level_figures(
    source: Series, phase: str, concurrency: int, cap: int | None = None
) -> dict[str, float]:
    """The figures of one level from one source (see the module docstring)."""
    out: dict[str, float] = {}
    for name in STARTUP_SERIES:
        value = source.last(name)
        if value is not None:
            out[name] = value
    running = source.series(phase, "running_req")
    if running:
        top = max(running)
        out["running_req_max"] = top
        limit = cap if cap is not None else (top if top < concurrency else None)
        busy = [
            v for v in running if v > 0
        ]  # a gauge read while nothing ran says nothing of the cap
        if limit is not None and busy:
            out["running_req_at_cap_fraction"] = round(
                sum(v >= limit for v in busy) / len(busy), 3
            )
        if source.watches("eager_running_req"):
            eager = source.series(phase, "eager_running_req")
            out["eager_fraction"] = round(min(1.0, len(eager) / len(running)), 3)
    passes = _growth(source.series(phase, "decode_passes"))
    eager_passes = _growth(source.series(phase, "eager_passes"))
    if passes and eager_passes is not None:
        out["eager_fraction"] = round(min(1.0, max(0.0, eager_passes / passes)), 3)
    queue = source.series(phase, "queue_req")
    if queue:
        out["queue_req_max"] = max(queue)
        out["queue_growing"] = 1.0 if _thirds_growing(queue) else 0.0
    usage = source.series(phase, "token_usage")
    if usage:
        out["token_usage_max"] = max(usage)
    for name in ("spec_accept_len", "spec_accept_rate"):  # speculative decoding: the level's mean
        accepted = [
            v for v in source.series(phase, name) if v > 0
        ]  # /metrics: 0 without speculation
        if accepted:
            out[name] = round(fmean(accepted), 3)
    return out
