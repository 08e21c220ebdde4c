"""The one place where emulated time is converted to the host's own time.

The emulator (``tuner.emulator``) divides every duration by ``K`` and publishes ``K`` in
``/server_info`` as ``emulator.time_scale``. Everything the tuner shows or stores for an emulated
run is on the real host's time scale: durations are multiplied by ``K`` and rates divided by
``K`` here, and nowhere else. ``K == 1`` means a real server: nothing changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TimeScale"]


@dataclass(frozen=True)
class TimeScale:
    """How much faster than the real host a server runs (``factor`` = K; 1 for a real server)."""

    factor: float = 1.0

    @property
    def emulated(self) -> bool:
        return self.factor != 1.0

    def duration(self, seconds: float) -> float:
        """A duration measured on this server, in host seconds."""
        return seconds * self.factor

    def rate(self, per_second: float) -> float:
        """A rate measured on this server (tokens/s, requests/s), per host second."""
        return per_second / self.factor

    def to_server(self, host_seconds: float) -> float:
        """A host-time budget (a timeout) in this server's own seconds."""
        return host_seconds / self.factor

    @classmethod
    def from_server_info(cls, info: dict[str, Any] | None) -> "TimeScale":
        """Read ``emulator.time_scale`` from a ``/server_info`` document (absent: real, K=1)."""
        emulator = (info or {}).get("emulator") or {}
        factor = float(emulator.get("time_scale", 1.0) or 1.0)
        if factor <= 0:
            raise ValueError(f"emulator.time_scale must be > 0, got {factor}")
        return cls(factor)
