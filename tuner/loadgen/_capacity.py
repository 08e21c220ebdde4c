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

# Where the sink listens on the host: the first port it can bind, below Linux's ephemeral range
# (32768-60999), where a client's own outgoing connections would take the port first.
SINK_PORTS = range(29170, 29230)
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
        kept = (
            f", {self.in_flight:,.0f} of {self.concurrency} in flight"
            if self.in_flight is not None
            else ""
        )
        processes = "1 process" if self.workers == 1 else f"{self.workers} processes"
        return f"c={self.concurrency}: {self.tokens_per_s:,.0f} output tok/s ({processes}{kept})"


def measure_client(
    url: str,
    concurrency: int,
    output_len: int,
    *,
    workers: int = 1,
    requests: int | None = None,
    via: str = "loopback",
) -> ClientCapacity:
    """One level of ``concurrency`` streams of ``output_len`` tokens against the sink at ``url``.

    Raises:
        TunerError: the level did not run to its end (the sink or the path failed).
    """
    spec = LevelSpec(
        concurrency=concurrency,
        num_requests=requests or 2 * concurrency,
        input_len=8,
        output_len=output_len,
        time_limit_s=120.0,
        warmup=min(concurrency, 64),
        seed=0,
    )
    metrics = asyncio.run(run_level(url, spec, api="sglang", client_workers=workers))
    if not metrics.clean():
        raise TunerError(
            f"the client's capacity at c={concurrency} was not measured: "
            f"{metrics.stop_reason or f'{metrics.failed} requests failed'}"
        )
    return ClientCapacity(
        concurrency,
        output_len,
        metrics.output_throughput,
        metrics.in_flight,
        workers,
        via,
        metrics.measurement_bound,
    )


def client_capacity(
    host: Any,
    run_root: str,
    python: str,
    levels: Sequence[int],
    output_len: int,
    *,
    workers: int = 1,
    requests: int | None = None,
    scale_up: bool = True,
) -> list[ClientCapacity]:
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
    handle, port, url = _start_sink(host, python, script, f"{run_root.rstrip('/')}/client-sink")
    try:
        via = "loopback" if url.endswith(f"127.0.0.1:{port}") else "the SSH forward"
        found = [
            measure_client(url, c, output_len, workers=workers, requests=requests, via=via)
            for c in sorted(levels)
        ]
        cores = os.cpu_count() or 1
        top = found[-1]
        if scale_up and top.bound and cores > workers:
            try:
                found.append(
                    measure_client(
                        url, top.concurrency, output_len, workers=cores, requests=requests, via=via
                    )
                )
            except TunerError:
                pass
        return found
    finally:
        host.stop_server(handle, grace_s=5.0, port=port, wait_gpu_s=0.0, port_wait_s=5.0)


def _start_sink(host: Any, python: str, script: str, run_dir: str) -> tuple[Any, int, str]:
    """The sink started on the first port of :data:`SINK_PORTS` it binds: its handle, port and
    the client's URL for it.

    Raises:
        TunerError: no port bound, or it did not answer in :data:`READY_S`.
    """
    for port in SINK_PORTS:
        if not host.port_free(port):
            continue
        handle = host.start_server(
            [python, script, "--port", str(port)], env={}, run_dir=run_dir, port=port
        )
        url = host.client_url(port, "127.0.0.1")
        deadline = time.monotonic() + READY_S
        while host.is_running(handle):
            if _healthy(url):
                return handle, port, url
            if time.monotonic() > deadline:
                host.stop_server(handle, grace_s=5.0, port=port, wait_gpu_s=0.0, port_wait_s=5.0)
                raise TunerError(
                    f"the client's capacity check: the sink at {url} did not answer "
                    f"in {READY_S:.0f} s"
                )
            time.sleep(0.1)
        host.stop_server(handle, grace_s=1.0, port=port, wait_gpu_s=0.0, port_wait_s=1.0)
    raise TunerError(
        f"the client's capacity check: no port in {SINK_PORTS.start}-{SINK_PORTS.stop - 1} "
        "could be bound on the host"
    )


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2.0) as answer:
            return answer.status == 200
    except (urllib.error.URLError, OSError):
        return False
