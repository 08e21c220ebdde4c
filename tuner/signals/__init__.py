"""Signals: what a trial says about where the server stops scaling, each with its source.

:mod:`._client`: the load generator's own levels (no engine profile needed).
"""

from __future__ import annotations

from tuner.signals._client import (
    FLAT,
    ClientObservation,
    ClientSignal,
    batch_saturates,
    cap_binds,
    client_observations,
    failures_above,
    requests_queue,
)

__all__ = [
    "ClientSignal", "ClientObservation", "FLAT", "cap_binds", "requests_queue", "batch_saturates",
    "failures_above", "client_observations",
]
