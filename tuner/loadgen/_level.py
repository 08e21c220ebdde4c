"""Closed-loop load levels: :func:`run_level` and the synchronous :func:`run_levels`.

A level keeps ``concurrency`` requests in flight (or starts them at Poisson arrival times when a
request rate is set) until ``num_requests`` have been sent. It ends early, at once, when:

- ``stop_check()`` returns a reason (polled about every 100 ms in a worker thread, so a slow
  check never stalls the clock of the streams);
- more requests failed than the error budget allows, or every request in flight lost its
  connection (the server died);
- the time limit passed.

Then every request in flight is cancelled and the session closed: no socket is left open.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence

import aiohttp

from tuner.errors import TunerError
from tuner.loadgen._aggregate import aggregate
from tuner.loadgen._apis import ApiFormat, api_format
from tuner.loadgen._metrics import LevelMetrics
from tuner.loadgen._phase import Phase, run_phase
from tuner.loadgen._datasets import level_requests
from tuner.loadgen._open_loop import arrival_times, with_rates
from tuner.loadgen._server import fetch_model, fetch_time_scale_async
from tuner.loadgen._spec import LevelSpec
from tuner.loadgen._stream import RequestLog, send_time_trace
from tuner.timescale import TimeScale

__all__ = ["run_level", "run_levels"]

StopCheck = Callable[[], str | None]

WARMUP_OUTPUT_LEN = 16
CONNECT_TIMEOUT_S = 10.0
READ_BUFFER_BYTES = 1 << 20


def _bodies(
    fmt: ApiFormat,
    spec: LevelSpec,
    count: int,
    seed: list[int],
    output_len: int,
    model: str | None,
) -> tuple[list[bytes], list[int], bool]:
    """Request bodies, serialized before the level starts, prompt lengths (estimates for text),
    and whether those lengths are estimates."""
    picked = level_requests(spec.dataset, count, spec.input_len, output_len, seed, fmt.name)
    bodies = [json.dumps(fmt.body(p, n, model, True)).encode()
              for p, n in zip(picked.prompts, picked.output_lens)]
    return bodies, picked.prompt_lens, picked.estimated


def _empty_metrics(spec: LevelSpec, scale: TimeScale, reason: str) -> LevelMetrics:
    return aggregate(
        RequestLog(spec.num_requests),
        concurrency=spec.concurrency,
        started=0.0,
        duration=0.0,
        scale=scale,
        stop_reason=reason,
        errors=(reason,),
    )


async def _warm_up(
    session: aiohttp.ClientSession,
    url: str,
    fmt: ApiFormat,
    spec: LevelSpec,
    scale: TimeScale,
    model: str | None,
    stop_check: StopCheck | None,
) -> str | None:
    """Send the level's warm-up requests (short ones, at the level's concurrency at most);
    they open the connections the level then reuses. Returns why it failed, if it did."""
    if not spec.warmup:
        return None
    output_len = min(WARMUP_OUTPUT_LEN, spec.output_len)
    bodies, lengths, _ = _bodies(fmt, spec, spec.warmup, [spec.seed, 1], output_len, model)
    concurrency = min(spec.warmup, spec.concurrency)
    warm = Phase(RequestLog(spec.warmup), concurrency, budget=spec.warmup - 1)
    deadline = time.perf_counter() + scale.to_server(spec.time_limit_s)
    await run_phase(session, url, fmt, warm, bodies, lengths, deadline, None, stop_check)
    return warm.stop_reason


async def run_level(
    base_url: str,
    spec: LevelSpec,
    *,
    api: str = "sglang",
    stop_check: StopCheck | None = None,
    time_scale: TimeScale | None = None,
) -> LevelMetrics:
    """Run one level against the server at ``base_url`` and measure it.

    Args:
        base_url: e.g. ``http://127.0.0.1:30000``.
        spec: the level.
        api: ``sglang`` (``/generate``), ``openai`` or ``openai-chat``.
        stop_check: polled about every 100 ms, in a worker thread (so it may block, e.g. on
            SSH, but must be thread-safe); a returned string ends the level at once and
            becomes its ``stop_reason``.
        time_scale: the server's time scale; None reads it from ``/server_info``.

    Returns:
        The level's metrics in host time. A server that does not answer gives metrics with
        nothing completed and the reason in ``stop_reason``; this function does not raise for
        what the server does.
    """
    fmt = api_format(api)
    base = base_url.rstrip("/")
    scale = time_scale or TimeScale()
    read_timeout = max(scale.to_server(spec.time_limit_s), 1.0)
    timeout = aiohttp.ClientTimeout(
        total=None, sock_connect=CONNECT_TIMEOUT_S, sock_read=read_timeout
    )
    connector = aiohttp.TCPConnector(limit=spec.concurrency)
    async with aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        read_bufsize=READ_BUFFER_BYTES,
        trace_configs=[send_time_trace()],
    ) as session:
        try:
            if time_scale is None:
                scale = await fetch_time_scale_async(session, base)
            model = await fetch_model(session, base) if fmt.needs_model else None
        except TunerError as exc:
            return _empty_metrics(spec, scale, str(exc))
        url = base + fmt.path
        failed_warm_up = await _warm_up(session, url, fmt, spec, scale, model, stop_check)
        if failed_warm_up:
            return _empty_metrics(spec, scale, f"warm-up failed: {failed_warm_up}")

        bodies, lengths, estimated = _bodies(
            fmt, spec, spec.num_requests, [spec.seed, 0], spec.output_len, model
        )
        phase = Phase(RequestLog(spec.num_requests), spec.concurrency, budget=spec.error_budget)
        started = time.perf_counter()
        deadline = started + scale.to_server(spec.time_limit_s)
        arrivals = arrival_times(spec, started, scale)
        ended = await run_phase(
            session,
            url,
            fmt,
            phase,
            bodies,
            lengths,
            deadline,
            arrivals,
            stop_check,
            time_limit_s=spec.time_limit_s,
        )
    metrics = aggregate(
        phase.log,
        concurrency=spec.concurrency,
        started=started,
        duration=ended - started,
        scale=scale,
        stop_reason=phase.stop_reason,
        errors=phase.errors,
    )
    return with_rates(metrics, spec, phase.log, scale, estimated)


def run_levels(
    base_url: str,
    specs: Sequence[LevelSpec],
    *,
    api: str = "sglang",
    stop_check: StopCheck | None = None,
    on_level: Callable[[LevelMetrics], bool | None] | None = None,
    time_scale: TimeScale | None = None,
) -> list[LevelMetrics]:
    """Run levels one after another (synchronously), stopping after a level that was
    stopped (``stop_reason`` set) or whose ``on_level`` callback returned False."""

    async def _run() -> list[LevelMetrics]:
        measured: list[LevelMetrics] = []
        for spec in specs:
            metrics = await run_level(
                base_url, spec, api=api, stop_check=stop_check, time_scale=time_scale
            )
            measured.append(metrics)
            verdict = on_level(metrics) if on_level is not None else None
            if metrics.stop_reason is not None or verdict is False:
                break
        return measured

    return asyncio.run(_run())
