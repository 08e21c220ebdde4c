"""One level served by several client processes, merged into one level's figures.

A single asyncio process reads a few thousand streamed events a second at most; beyond that it
measures itself (:mod:`tuner.loadgen._health`). :func:`run_level_in_processes` splits the
level's slots over ``workers`` processes (slot ``k`` of ``N`` takes requests ``k, k+N, ...``),
which warm up, wait for each other at a barrier and then run their share at once. Their request
logs are merged: on one machine ``time.perf_counter`` is the system's monotonic clock, the same
in every process, and an emulated server's stamps are its own clock, so the merged log is one
level. The parent polls ``stop_check`` and stops every process when it fires.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import queue
import time
import uuid
from typing import Any

from tuner.loadgen._apis import Dialect
from tuner.loadgen._health import merge_health
from tuner.loadgen._level_figures import empty_metrics, level_metrics
from tuner.loadgen._metrics import LevelMetrics
from tuner.loadgen._server import emulator_clock, fetch_server_info
from tuner.loadgen._share import ShareNotStarted, ShareResult, StopCheck, measure_share
from tuner.loadgen._spec import LevelSpec
from tuner.loadgen._stream import RequestLog
from tuner.timescale import TimeScale

__all__ = ["merge_logs", "run_level_in_processes"]

POLL_S = 0.1
START_TIMEOUT_S = 120.0  # processes that are not all warmed up by then give up


def _share_main(
    base_url: str,
    spec: LevelSpec,
    api: Dialect,
    scale: TimeScale,
    stamped: bool,
    share: tuple[int, int],
    level_id: str,
    barrier: Any,
    stop: Any,
    results: Any,
    headers: dict[str, str] | None = None,
) -> None:
    """A client process: its share of the level, put on ``results`` as ``(k, result)``."""

    async def gate() -> None:
        await asyncio.to_thread(barrier.wait, START_TIMEOUT_S)

    def stopped() -> str | None:
        return "stopped by the parent client process" if stop.is_set() else None

    try:
        result = asyncio.run(
            measure_share(
                base_url,
                spec,
                api,
                scale,
                stamped,
                stopped,
                share=share,
                gate=gate,
                level_id=level_id,
                headers=headers,
            )
        )
    except Exception as exc:  # reported to the parent as this share's failure
        barrier.abort()
        result = ShareNotStarted(f"client process {share[0]} failed: {type(exc).__name__}: {exc}")
    if isinstance(result, ShareNotStarted):
        barrier.abort()
    results.put((share[0], result))


def merge_logs(parts: list[RequestLog]) -> RequestLog:
    """One log of all parts' requests (``after`` indices shifted to the merged positions)."""
    merged = RequestLog(sum(part.size for part in parts))
    offset = 0
    for part in parts:
        span = slice(offset, offset + part.size)
        for name in (
            "status",
            "start",
            "sent",
            "due",
            "end",
            "event_times",
            "event_counts",
            "output_tokens",
            "input_tokens",
            "asked",
        ):
            getattr(merged, name)[span] = getattr(part, name)
        merged.after[span] = [a + offset if a >= 0 else -1 for a in part.after]
        merged.client_counted_inputs += part.client_counted_inputs
        offset += part.size
    return merged


async def _server_facts(
    base_url: str, headers: dict[str, str] | None = None
) -> tuple[TimeScale, bool] | str:
    import aiohttp

    from tuner.errors import TunerError

    try:
        async with aiohttp.ClientSession(headers=headers) as session:
            info = await fetch_server_info(session, base_url.rstrip("/"))
    except TunerError as exc:
        return str(exc)
    return TimeScale.from_server_info(info), emulator_clock(info)


async def run_level_in_processes(
    base_url: str,
    spec: LevelSpec,
    api: Dialect,
    time_scale: TimeScale | None,
    stop_check: StopCheck | None,
    workers: int,
    headers: dict[str, str] | None = None,
) -> LevelMetrics:
    """:func:`tuner.loadgen.run_level` with the slots shared by ``workers`` processes."""
    workers = max(1, min(workers, spec.concurrency))
    facts = await _server_facts(base_url, headers)
    if isinstance(facts, str):
        return empty_metrics(spec, time_scale or TimeScale(), facts)
    scale, stamped = (time_scale or facts[0]), facts[1]
    level_id = uuid.uuid4().hex
    context = multiprocessing.get_context("spawn")  # no inherited threads or event loop
    barrier, stop, results = context.Barrier(workers), context.Event(), context.Queue()
    processes = [
        context.Process(
            target=_share_main,
            daemon=True,
            args=(
                base_url,
                spec,
                api,
                scale,
                stamped,
                (k, workers),
                level_id,
                barrier,
                stop,
                results,
                headers,
            ),
        )
        for k in range(workers)
    ]
    for process in processes:
        process.start()
    shares: dict[int, ShareResult | ShareNotStarted] = {}
    stop_reason: str | None = None
    poll: asyncio.Future[str | None] | None = None
    try:
        while len(shares) < workers:
            try:
                k, result = await asyncio.to_thread(results.get, True, POLL_S)
                shares[k] = result
                continue
            except queue.Empty:
                pass
            if any(not p.is_alive() for p in processes) and results.empty():
                await asyncio.sleep(POLL_S)
                if results.empty() and len(shares) < workers:
                    dead = [p.pid for p in processes if not p.is_alive()]
                    if len(dead) + len(shares) >= workers and len(shares) < workers:
                        stop_reason = stop_reason or f"client process(es) {dead} ended early"
                        stop.set()
                        break
            if stop_check is not None and stop_reason is None:
                if poll is not None and poll.done():
                    stop_reason, poll = poll.result(), None
                    if stop_reason:
                        stop.set()
                if poll is None:
                    poll = asyncio.ensure_future(asyncio.to_thread(stop_check))
    finally:
        stop.set()
        deadline = time.monotonic() + 10.0
        while len(shares) < workers and time.monotonic() < deadline:
            try:
                k, result = await asyncio.to_thread(results.get, True, POLL_S)
                shares[k] = result
            except queue.Empty:
                if not any(p.is_alive() for p in processes):
                    break
        for process in processes:
            process.join(timeout=5.0)
            if process.is_alive():
                process.kill()
                process.join()
    failed = [r.reason for r in shares.values() if isinstance(r, ShareNotStarted)]
    done = [share for k in sorted(shares) if isinstance(share := shares[k], ShareResult)]
    if failed or not done:
        return empty_metrics(spec, scale, stop_reason or (failed[0] if failed else "no result"))
    log = merge_logs([r.log for r in done])
    started = (
        min(r.started for r in done if r.ended > r.started)
        if any(r.ended > r.started for r in done)
        else 0.0
    )
    ended = max(r.ended for r in done)
    merged = ShareResult(
        log=log,
        started=started,
        ended=ended,
        stop_reason=stop_reason or next((r.stop_reason for r in done if r.stop_reason), None),
        errors=[e for r in done for e in r.errors][:5],
        health=None,
        scale=scale,
        estimated=any(r.estimated for r in done),
        repeated_prompts=max(r.repeated_prompts for r in done),  # each share drew the whole level
    )
    health = merge_health([r.health for r in done if r.health is not None], 0.0)
    return level_metrics(spec, scale, merged, health)
