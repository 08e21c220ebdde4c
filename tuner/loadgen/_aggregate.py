"""From a level's :class:`RequestLog` to its :class:`LevelMetrics`, with numpy, after the level.

Definitions follow ``sglang.bench_serving``: TTFT is the time to the first event with text;
TPOT is ``(e2e - ttft) / (output_tokens - 1)`` over requests with more than one token; an
event carrying n tokens contributes n inter-token latencies of ``gap / n`` each; throughputs
divide by the level's wall time; ``max_output_tokens_per_s`` is the best one-second bin of
token times, an event's tokens spread over the gap before it (as bench_serving rebuilds token
times from its spread inter-token latencies).
Every figure is converted to host time here, through the level's :class:`TimeScale`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tuner.loadgen._metrics import LevelMetrics
from tuner.loadgen._stream import COMPLETED, FAILED, RequestLog
from tuner.timescale import TimeScale

__all__ = ["aggregate", "percentile_name"]


def _token_steps(counts: list[int | None], total: int) -> np.ndarray:
    """Tokens carried by each event (float where the server gave no per-event count)."""
    if counts and all(count is not None for count in counts):
        steps = np.diff(np.asarray(counts, dtype=np.float64), prepend=0.0)
        return np.maximum(steps, 0.0)
    return np.full(len(counts), total / max(len(counts), 1))


def _spread(times: np.ndarray, steps: np.ndarray) -> tuple[np.ndarray, ...]:
    """Spread each later event's tokens evenly over the gap before it, as bench_serving does.

    Returns:
        (inter-token latencies, token times, token weights): an event carrying n tokens after
        a gap g gives n latencies of g / n and n tokens at g / n, 2g / n, ..., g after the
        previous event (weights sum to n where the server gave no per-event count).
    """
    gaps, carried, previous = np.diff(times), steps[1:], times[:-1]
    keep = carried > 0
    gaps, carried, previous = gaps[keep], carried[keep], previous[keep]
    whole = np.maximum(np.rint(carried).astype(np.int64), 1)
    itls = np.repeat(gaps / carried, whole)
    rank = np.arange(whole.sum()) - np.repeat(np.cumsum(whole) - whole, whole) + 1
    token_times = np.repeat(previous, whole) + np.repeat(gaps / whole, whole) * rank
    weights = np.repeat(carried / whole, whole)
    return itls, token_times, weights


def _stats(values_s: np.ndarray, scale: TimeScale, prefix: str) -> dict[str, Any]:
    """mean/median/p90/p99 in host milliseconds of durations in server seconds (the LevelMetrics
    fields ``<stat>_<prefix>_ms``, each a float or None)."""
    names = [f"{stat}_{prefix}_ms" for stat in ("mean", "median", "p90", "p99")]
    if values_s.size == 0:
        return dict.fromkeys(names)
    figures = (
        float(np.mean(values_s)),
        float(np.median(values_s)),
        float(np.percentile(values_s, 90)),
        float(np.percentile(values_s, 99)),
    )
    return {name: scale.duration(value) * 1000.0 for name, value in zip(names, figures)}


def percentile_name(percentile: float, kind: str) -> str:
    """``p95_ttft_ms``, ``p99.9_itl_ms``: the key of a latency percentile (vllm bench serve's)."""
    shown = int(percentile) if float(percentile).is_integer() else percentile
    return f"p{shown}_{kind}_ms"


def _percentiles(
    samples: dict[str, np.ndarray], asked: Sequence[float], scale: TimeScale
) -> dict[str, float | None]:
    """The asked percentiles of each latency kind, in host milliseconds."""
    return {
        percentile_name(q, kind): (
            scale.duration(float(np.percentile(values, q))) * 1000.0 if values.size else None
        )
        for kind, values in samples.items()
        for q in asked
    }


def aggregate(
    log: RequestLog,
    *,
    concurrency: int,
    started: float,
    duration: float,
    scale: TimeScale,
    stop_reason: str | None,
    errors: Sequence[str],
    percentiles: Sequence[float] = (),
) -> LevelMetrics:
    """The metrics of a level that started at ``started`` and lasted ``duration`` server s
    (``percentiles``: more latency percentiles, 0-100, in :attr:`LevelMetrics.percentiles`)."""
    done = log.indices(COMPLETED)
    ttfts, e2es, tpots, itl_parts, time_parts, token_parts = [], [], [], [], [], []
    for i in done:
        times = np.asarray(log.event_times[i])
        total = log.output_tokens[i]
        steps = _token_steps(log.event_counts[i], total)
        ttft = times[0] - log.start[i]
        e2e = log.end[i] - log.start[i]
        ttfts.append(ttft)
        e2es.append(e2e)
        if total > 1:
            tpots.append((e2e - ttft) / (total - 1))
        time_parts.append(times[:1])  # the first event's tokens arrive at once
        token_parts.append(steps[:1])
        if times.size > 1:
            itls, token_times, weights = _spread(times, steps)
            itl_parts.append(itls)
            time_parts.append(token_times)
            token_parts.append(weights)

    output_tokens = sum(log.output_tokens[i] for i in done)
    short = sum(1 for i in done if log.output_tokens[i] < log.asked[i])
    input_tokens = sum(log.input_tokens[i] for i in done)
    seconds = max(duration, 1e-9)
    best_window = 0.0
    if time_parts:
        width = scale.to_server(1.0)  # one host second
        offsets = (np.concatenate(time_parts) - started) / width
        per_bin = np.bincount(
            np.maximum(offsets, 0).astype(np.int64), weights=np.concatenate(token_parts)
        )
        best_window = scale.rate(float(per_bin.max()) / width)

    empty = np.empty(0)
    samples = {
        "ttft": np.asarray(ttfts),
        "tpot": np.asarray(tpots),
        "itl": np.concatenate(itl_parts) if itl_parts else empty,
        "e2e": np.asarray(e2es),
    }
    return LevelMetrics(
        concurrency=concurrency,
        num_requests=log.size,
        completed=len(done),
        failed=len(log.indices(FAILED)),
        duration_s=scale.duration(duration),
        input_tokens=int(input_tokens),
        output_tokens=int(output_tokens),
        output_throughput=scale.rate(output_tokens / seconds),
        total_throughput=scale.rate((input_tokens + output_tokens) / seconds),
        request_throughput=scale.rate(len(done) / seconds),
        **{
            key: value
            for kind, values in samples.items()
            for key, value in _stats(values, scale, kind).items()
        },
        max_output_tokens_per_s=best_window,
        stop_reason=stop_reason,
        emulated=scale.emulated,
        time_scale=scale.factor,
        errors=tuple(errors),
        short_replies=short,
        percentiles=_percentiles(samples, percentiles, scale),
    )
