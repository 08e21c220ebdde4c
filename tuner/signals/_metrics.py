"""What the server's Prometheus ``/metrics`` endpoint said during each level, sampled by the client.

The engine profile maps series names to metrics (``metrics_observations`` in
``tuner/engines/*.yaml``: ``running_req: "sglang:num_running_reqs"``, or with labels,
``eager_passes: 'sglang:cuda_graph_passes_total{mode="decode_none"}'``). During each level
:func:`sample_metrics` asks the server for ``metrics_path`` every :func:`sample_every` seconds,
through the same base URL (the SSH forward) and API-key header the client uses, and
:class:`MetricsObserver` parses each answer with ``prometheus_client``'s own parser: a gauge
given per scheduler or engine (labels ``tp_rank``, ``engine``) is read as its largest value, a
counter as the sum. A server that does not serve the path (SGLang without ``--enable-metrics``:
404) is asked once, then no more for that server's life.
"""

from __future__ import annotations

import re
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.parser import text_string_to_metric_families

from tuner.signals._series import Series

__all__ = ["MetricSelector", "MetricsObserver", "ServerSide", "sample_metrics", "sample_every"]


class ServerSide(Protocol):
    """What the signals read of a running server's session (:class:`tuner.lifecycle.ServerSession`
    is one): where the client reaches it, the headers it sends, and the phase now running."""

    @property
    def base_url(self) -> str: ...

    @property
    def client_headers(self) -> Mapping[str, str]: ...

    @property
    def phase(self) -> str: ...


_SELECTOR = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"]*)"\s*(?:,|$)')
# Samples a level gets from a real server (one every half second) and from the emulator (its
# levels last about a second of wall time: one every 50 ms, ~20 a level).
REAL_EVERY_S = 0.5
EMULATED_EVERY_S = 0.05
SCRAPE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class MetricSelector:
    """One sample name and the labels its samples must carry (``name{label="value", ...}``)."""

    metric: str
    labels: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, text: str) -> MetricSelector:
        """Read ``name`` or ``name{label="value", ...}``; a ValueError says what is wrong."""
        found = _SELECTOR.match(text.strip())
        if found is None:
            raise ValueError(
                f"{text!r} is not a metric name (letters, digits, _ and :) "
                'with optional {label="value"} selectors'
            )
        labels: list[tuple[str, str]] = []
        rest = found[2] or ""
        while rest.strip():
            label = _LABEL.match(rest)
            if label is None:
                raise ValueError(f'{text!r}: labels are written {{name="value", ...}}')
            labels.append((label[1], label[2]))
            rest = rest[label.end() :]
        return cls(found[1], tuple(labels))

    def matches(self, name: str, labels: Mapping[str, str]) -> bool:
        return name == self.metric and all(labels.get(k) == v for k, v in self.labels)


class MetricsObserver(Series):
    """The numbers the profile's metrics give, one per series and scrape, by phase.

    Args:
        metrics: series name -> selector text (the profile's ``metrics_observations``).
        path: where the server serves them (the profile's ``metrics_path``).
    """

    def __init__(self, metrics: Mapping[str, str], path: str = "/metrics") -> None:
        super().__init__(metrics)
        self.selectors = {name: MetricSelector.parse(text) for name, text in metrics.items()}
        self.path = path
        self.unavailable: str | None = None  # why the server is no longer asked (HTTP 404)
        self.scrapes = 0

    def read(self, text: str, phase: str) -> None:
        """Record one scrape's answer (Prometheus text format) as taken during ``phase``."""
        found: dict[str, list[float]] = {}
        counters: set[str] = set()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                for name, selector in self.selectors.items():
                    if selector.matches(sample.name, sample.labels):
                        found.setdefault(name, []).append(float(sample.value))
                        if family.type == "counter" or sample.name.endswith("_total"):
                            counters.add(name)
        for name, values in found.items():
            self.add(phase, name, sum(values) if name in counters else max(values))
        self.scrapes += 1


def sample_every(emulated: bool) -> float:
    """Seconds between two scrapes of one level (wall time)."""
    return EMULATED_EVERY_S if emulated else REAL_EVERY_S


def _scrape(url: str, headers: Mapping[str, str]) -> str:
    request = urllib.request.Request(url, headers={**headers, "Accept": "text/plain"})
    with urllib.request.urlopen(request, timeout=SCRAPE_TIMEOUT_S) as answer:  # noqa: S310 (loopback)
        return answer.read().decode("utf-8", "replace")


def _sample(
    observer: MetricsObserver,
    url: str,
    headers: Mapping[str, str],
    phase: str,
    every_s: float,
    stop: threading.Event,
) -> None:
    while True:
        try:
            observer.read(_scrape(url, headers), phase)
        except urllib.error.HTTPError as error:  # no such endpoint here: ask no more
            observer.unavailable = f"HTTP {error.code} from {observer.path}"
            return
        except (OSError, ValueError):  # busy or restarting: the next sample may come
            pass
        if stop.wait(every_s):
            return


@contextmanager
def sample_metrics(session: ServerSide, emulated: bool) -> Iterator[MetricsObserver | None]:
    """Scrape ``session``'s server (its ``metrics`` observer, ``base_url``, ``client_headers``)
    in a thread for the duration of the block, each answer recorded under ``session.phase``;
    nothing when the session has no observer or its server serves no metrics."""
    observer: MetricsObserver | None = getattr(session, "metrics", None)
    if observer is None or observer.unavailable is not None:
        yield observer
        return
    stop = threading.Event()
    thread = threading.Thread(
        target=_sample,
        name="metrics-sampler",
        daemon=True,
        args=(
            observer,
            session.base_url.rstrip("/") + observer.path,
            dict(session.client_headers),
            session.phase,
            sample_every(emulated),
            stop,
        ),
    )
    thread.start()
    try:
        yield observer
    finally:
        stop.set()
        thread.join(SCRAPE_TIMEOUT_S + 1.0)
