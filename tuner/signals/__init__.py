"""What a server said about itself during a trial, from each source, with the source kept.

An observation (the batch at the running-request cap, queueing, the KV pool full, batches above
the captured CUDA graphs) can come from the server log (:class:`LogObserver`, the engine
profile's ``log_observations`` patterns), from its Prometheus ``/metrics`` endpoint
(:class:`MetricsObserver`, the profile's ``metrics_observations``, sampled by the client during
each level: :func:`sample_metrics`), both giving the same names (:func:`level_figures`), or from
the client's own levels (:func:`client_observations`: the cap binds, requests queue, the batch
saturates, failures above a concurrency; no engine profile needed).
:func:`level_observations` merges one level's figures from the server's sources (metrics
preferred) and records where each came from (:class:`Source`); :class:`TrialObservations` is
what a trial stores.
"""

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
from tuner.signals._combine import (
    PREFERRED,
    LevelSignals,
    TrialObservations,
    level_observations,
    observe_level,
)
from tuner.signals._log import LogObserver
from tuner.signals._metrics import MetricSelector, MetricsObserver, sample_every, sample_metrics
from tuner.signals._series import SERIES_NAMES, STARTUP_SERIES, Series, level_figures
from tuner.signals._source import Source

__all__ = [
    "Source",
    "Series",
    "SERIES_NAMES",
    "STARTUP_SERIES",
    "level_figures",
    "LogObserver",
    "MetricSelector",
    "MetricsObserver",
    "sample_metrics",
    "sample_every",
    "PREFERRED",
    "LevelSignals",
    "TrialObservations",
    "level_observations",
    "observe_level",
    "ClientSignal",
    "ClientObservation",
    "FLAT",
    "cap_binds",
    "requests_queue",
    "batch_saturates",
    "failures_above",
    "client_observations",
]
