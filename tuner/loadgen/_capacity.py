"""How much the client itself can take in, on this machine and through the path to the host.

:func:`measure_client` runs the study's levels (its concurrencies and output length) against a
server that streams one event a token as fast as it can (:mod:`tuner.loadgen._sink`), so the
figure is the client's and its path's, never a server's. :func:`client_capacity` starts that
server where the inference server will run: on this machine for a local host, on the remote
host (bound to its loopback) for an SSH host, so the figure includes the SSH forward the study's
levels will go through. ``tuner doctor`` and the preflight print it before any host time is
spent: a level whose server serves more than the client takes in at that concurrency will be
client-bound (run again with more client processes, then counted as a lower bound).
"""

from __future__ import annotations

import asyncio
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tuner.errors import TunerError
from tuner.loadgen._level import run_level
from tuner.loadgen._sink import SOURCE
from tuner.loadgen._spec import LevelSpec

__all__ = ["ClientCapacity", "client_capacity", "measure_client"]

SINK_PORTS = range(39170, 39230)  # where the sink listens on the host (the first free one)
READY_S = 15.0


@dataclass(frozen=True)
class ClientCapacity:
    """What the client took in at one level against the sink.

    ``tokens_per_s``: output tokens a second; ``in_flight``: requests it kept in flight on
    average (of ``concurrency``); ``workers``: client processes; ``via``: ``loopback`` or ``the
    SSH forward``; ``bound``: the client's verdict on itself (None: it kept up with its own
    measurement)."""

    concurrency: int
    output_len: int
    tokens_per_s: float
    in_flight: float | None
    workers: int
    via: str
    bound: str | None = None

    def text(self) -> str:
        kept = (f", {self.in_flight:,.0f} of {self.concurrency} in flight"
                if self.in_flight is not None else "")
        processes = "1 process" if self.workers == 1 else f"{self.workers} processes"
        return f"c={self.concurrency}: {self.tokens_per_s:,.0f} output tok/s ({processes}{kept})"


def measure_client(url: str, concurrency: int, output_len: int, *, workers: int = 1,
                   requests: int | None = None, via: str = "loopback") -> ClientCapacity:
    """One level of ``concurrency`` streams of ``output_len`` tokens against the sink at ``url``.

    Raises:
        TunerError: the level did not run to its end (the sink or the path failed).
    """
    spec = LevelSpec(concurrency=concurrency, num_requests=requests or 2 * concurrency, input_len=8,
                     output_len=output_len, time_limit_s=120.0, warmup=min(concurrency, 64), seed=0)
    metrics = asyncio.run(run_level(url, spec, api="sglang", client_workers=workers))
    if not metrics.clean():
        raise TunerError(f"the client's capacity at c={concurrency} was not measured: "
                         f"{metrics.stop_reason or f'{metrics.failed} requests failed'}")
    return ClientCapacity(concurrency, output_len, metrics.output_throughput, metrics.in_flight,
                          workers, via, metrics.measurement_bound)


def client_capacity(host: Any, run_root: str, python: str, levels: Sequence[int], output_len: int,
                    *, workers: int = 1, requests: int | None = None,
                    scale_up: bool = True) -> list[ClientCapacity]:
    """The client's capacity at each of ``levels`` against the sink started on ``host`` (its
    loopback; reached through the SSH forward when the host is remote), with ``workers``
    processes, and (``scale_up``) at the top level again with this machine's cores when the
    client fell behind there, as a study's level would be run again (a scaled-up run that
    fails is left out: the figures with ``workers`` processes stand).

    Raises:
        TunerError: the sink did not start or the levels failed.
    """
    script = f"{run_root.rstrip('/')}/client-sink.py"
    host.write_file(script, SOURCE.encode(), mode=0o600)
    port = next((p for p in SINK_PORTS if host.port_free(p)), None)
    if port is None:
        raise TunerError(f"no free port for the client's capacity check in {SINK_PORTS.start}-{SINK_PORTS.stop - 1}")
    handle = host.start_server([python, script, "--port", str(port)], env={},
                               run_dir=f"{run_root.rstrip('/')}/client-sink", port=port)
    try:
        url = host.client_url(port, "127.0.0.1")
        via = "loopback" if url.endswith(f"127.0.0.1:{port}") else "the SSH forward"
        _wait_healthy(url)
        found = [measure_client(url, c, output_len, workers=workers, requests=requests, via=via)
                 for c in sorted(levels)]
        cores = os.cpu_count() or 1
        top = found[-1]
        if scale_up and top.bound and cores > workers:
            try:
                found.append(measure_client(url, top.concurrency, output_len, workers=cores,
                                            requests=requests, via=via))
            except TunerError:
                pass
        return found
    finally:
        host.stop_server(handle, grace_s=5.0, port=port, wait_gpu_s=0.0, port_wait_s=5.0)


def _wait_healthy(url: str) -> None:
    deadline = time.monotonic() + READY_S
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2.0) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise TunerError(f"the client's capacity check: the sink at {url} did not answer in {READY_S:.0f} s")
        time.sleep(0.1)
