"""What the server's log said during a trial, as numbers a strategy can read.

The engine profile names the log patterns (``log_observations`` in ``tuner/engines/*.yaml``:
data, not code): each maps a series name to a regular expression whose first group is a
number. :class:`LogObserver` collects every match, by the session's phase (``starting``,
``probe``, ``level-<c>``); :func:`level_observations` turns one level's series (and its GPU
telemetry) into the flat figures stored on the trial:

- ``kv_tokens``: the KV pool size at start (``KV Cache is allocated. #tokens: N``);
- ``graph_max_bs``: the largest batch the CUDA graphs captured at start (``Capture cuda graph bs
  [1, 2, ..., 512]``; none without graphs);
- ``running_req_max``: the most requests running at once; ``running_req_at_cap_fraction``: the
  share of the level's samples at the running-request cap (the cap flag's value, else the
  level's own maximum when it stayed below the concurrency);
- ``queue_req_max``, ``queue_growing`` (1 when the queue was longer in the last third of the
  level than in the first);
- ``token_usage_max``: the KV pool's highest use (0-1);
- ``eager_fraction``: the share of the level's decode lines that ran without CUDA graphs (the
  batch above the captured size; only when the profile has an ``eager_running_req`` pattern);
- ``gpu_power_w``, ``gpu_power_limit_w``: the level's mean GPU power and its limit.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from statistics import fmean
from typing import Any

__all__ = ["LogObserver", "level_observations", "STARTUP_SERIES"]

STARTUP_SERIES = ("kv_tokens", "graph_max_bs")  # read from the start-up phase; the others per level


class LogObserver:
    """Collects the numbers the profile's patterns find in the server log, by phase."""

    def __init__(self, patterns: Mapping[str, str]) -> None:
        self._patterns = {name: re.compile(pattern) for name, pattern in patterns.items()}
        self._series: dict[tuple[str, str], list[float]] = {}
        self._lock = threading.Lock()

    def feed(self, line: str, phase: str) -> None:
        """Read one log line written during ``phase``."""
        for name, pattern in self._patterns.items():
            match = pattern.search(line)
            if match is None:
                continue
            try:
                value = float(match.group(1).replace(",", ""))  # "12,345" as vLLM writes it
            except (IndexError, ValueError):
                continue
            with self._lock:
                self._series.setdefault((phase, name), []).append(value)

    def series(self, phase: str, name: str) -> list[float]:
        """The values of ``name`` seen during ``phase``, in log order."""
        with self._lock:
            return list(self._series.get((phase, name), []))

    def watches(self, name: str) -> bool:
        """Whether the profile has a pattern for ``name``."""
        return name in self._patterns

    def last(self, name: str) -> float | None:
        """The last value of ``name`` in any phase (e.g. ``kv_tokens``)."""
        with self._lock:
            found = [values[-1] for (_, series), values in self._series.items() if series == name and values]
        return found[-1] if found else None


def _thirds_growing(values: list[float]) -> bool:
    if len(values) < 3:
        return False
    third = len(values) // 3
    return fmean(values[-third:]) > fmean(values[:third]) + 1.0


def level_observations(
    observer: LogObserver | None,
    phase: str,
    concurrency: int,
    cap: int | None = None,
    gpu: Mapping[str, Any] | None = None,
) -> dict[str, float]:
    """The figures of one level (see the module docstring); only those the log or telemetry gave."""
    out: dict[str, float] = {}
    if observer is not None:
        for name in STARTUP_SERIES:
            value = observer.last(name)
            if value is not None:
                out[name] = value
        running = observer.series(phase, "running_req")
        if running:
            top = max(running)
            out["running_req_max"] = top
            limit = cap if cap is not None else (top if top < concurrency else None)
            if limit is not None:
                out["running_req_at_cap_fraction"] = round(sum(v >= limit for v in running) / len(running), 3)
            if observer.watches("eager_running_req"):
                eager = observer.series(phase, "eager_running_req")
                out["eager_fraction"] = round(min(1.0, len(eager) / len(running)), 3)
        queue = observer.series(phase, "queue_req")
        if queue:
            out["queue_req_max"] = max(queue)
            out["queue_growing"] = 1.0 if _thirds_growing(queue) else 0.0
        usage = observer.series(phase, "token_usage")
        if usage:
            out["token_usage_max"] = max(usage)
        for name in ("spec_accept_len", "spec_accept_rate"):  # speculative decoding's lines
            accepted = observer.series(phase, name)
            if accepted:
                out[name] = round(fmean(accepted), 3)
    if gpu:
        if gpu.get("mean_power_w") is not None:
            out["gpu_power_w"] = float(gpu["mean_power_w"])
        if gpu.get("power_limit_w"):
            out["gpu_power_limit_w"] = float(gpu["power_limit_w"])
    return out
