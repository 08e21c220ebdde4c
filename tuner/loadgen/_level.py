"""Closed-loop load levels: :func:`run_level` and the synchronous :func:`run_levels`.

A level keeps ``concurrency`` requests in flight (or starts them at a request rate's arrival
times, Poisson or constant: an open loop) until ``num_requests`` have been sent. It ends early,
at once, when:

- ``stop_check()`` returns a reason (polled about every 100 ms in a worker thread, so a slow
  check never stalls the clock of the streams);
- more requests failed than the error budget allows, or every request in flight lost its
  connection (the server died);
- the time limit passed.

Then every request in flight is cancelled and the session closed: no socket is left open.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Sequence

from tuner.loadgen._apis import Dialect, as_dialect
from tuner.loadgen._level_figures import empty_metrics, level_metrics
from tuner.loadgen._metrics import LevelMetrics
from tuner.loadgen._share import ShareNotStarted, StopCheck, measure_share
from tuner.loadgen._spec import LevelSpec
from tuner.loadgen._stream import RequestLog
from tuner.loadgen._workers import run_level_in_processes
from tuner.timescale import TimeScale

__all__ = ["run_level", "run_levels"]


async def run_level(
    base_url: str,
    spec: LevelSpec,
    *,
    api: str | Dialect = "sglang",
    stop_check: StopCheck | None = None,
    time_scale: TimeScale | None = None,
    client_workers: int = 1,
    headers: dict[str, str] | None = None,
    progress: Callable[[RequestLog], None] | None = None,
) -> LevelMetrics:
    """Run one level against the server at ``base_url`` and measure it.

    Args:
        base_url: e.g. ``http://127.0.0.1:30000``.
        spec: the level.
        api: ``sglang`` (``/generate``), ``openai`` or ``openai-chat``, or a :class:`Dialect`:
            the API with the model's name and the extensions the server takes (a strict
            OpenAI server takes none).
        stop_check: polled about every 100 ms, in a worker thread (so it may block, e.g. on
            SSH, but must be thread-safe); a returned string ends the level at once and
            becomes its ``stop_reason``.
        time_scale: the server's time scale; None reads it from ``/server_info``.
        client_workers: client processes that share the level's slots (1: this process);
            their requests are merged into one level's figures.
        headers: sent with every request (the server's API key: :func:`auth_headers`).
        progress: shown the level's request log about every 100 ms while it runs (one client
            process only: with several, nothing is shown until the level ends).

    Returns:
        The level's metrics in host time. A server that does not answer gives metrics with
        nothing completed and the reason in ``stop_reason``; this function does not raise for
        what the server does. A level whose client measured itself (its lag, its CPU, its
        late sends; see :mod:`tuner.loadgen._health`) says so in ``measurement_bound``.
    """
    api = as_dialect(api)  # an unknown API is a ConfigError here, before any request
    if client_workers > 1:
        return await run_level_in_processes(
            base_url, spec, api, time_scale, stop_check, client_workers, headers
        )
    result = await measure_share(
        base_url, spec, api, time_scale, None, stop_check, headers=headers, progress=progress
    )
    if isinstance(result, ShareNotStarted):
        return empty_metrics(spec, time_scale or TimeScale(), result.reason)
    return level_metrics(spec, result.scale, result, result.health)


def run_levels(
    base_url: str,
    specs: Sequence[LevelSpec],
    *,
    api: str | Dialect = "sglang",
    stop_check: StopCheck | None = None,
    on_level: Callable[[LevelMetrics], bool | None] | None = None,
    time_scale: TimeScale | None = None,
    client_workers: int = 1,
    headers: dict[str, str] | None = None,
    on_progress: Callable[[LevelSpec, RequestLog], None] | None = None,
) -> list[LevelMetrics]:
    """Run levels one after another (synchronously), stopping after a level that was
    stopped (``stop_reason`` set) or whose ``on_level`` callback returned False.
    ``on_progress(spec, log)``: each level's requests so far, while it runs."""

    async def _run() -> list[LevelMetrics]:
        measured: list[LevelMetrics] = []
        for spec in specs:
            metrics = await run_level(
                base_url,
                spec,
                api=api,
                stop_check=stop_check,
                time_scale=time_scale,
                client_workers=client_workers,
                headers=headers,
                progress=functools.partial(on_progress, spec) if on_progress else None,
            )
            measured.append(metrics)
            verdict = on_level(metrics) if on_level is not None else None
            if metrics.stop_reason is not None or verdict is False:
                break
        return measured

    return asyncio.run(_run())
