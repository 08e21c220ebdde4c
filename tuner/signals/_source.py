"""Where an observation was read: the one vocabulary of sources, stored with every observation."""

from __future__ import annotations

from enum import Enum

__all__ = ["Source"]


class Source(str, Enum):
    """Where a signal was read (the stored value is the text in parentheses of a rule's reason)."""

    SERVER_LOG = "server-log"  # the server's log lines (tuner.signals._log)
    METRICS = "metrics"  # the server's Prometheus /metrics endpoint (tuner.signals._metrics)
    CLIENT = "client"  # the load generator's levels
    TELEMETRY = "telemetry"  # the GPUs' nvidia-smi readings (tuner.telemetry)
    OUTCOME = "outcome"  # how an earlier trial ended (its failure class)
    SPACE = "space"  # the search space itself (its workload's top concurrency)
