"""How many streamed tokens per second the load generator can take in, on this machine.

A local server (another process, ``tests/support/pacing_server.py`` with no pacing) streams as
fast as it can, one token per event, to ``--concurrency`` concurrent streams. In the same run,
alternating, this script measures:

- the full client: ``tuner.loadgen.run_level``, recording every metric it records;
- a bare loop: aiohttp, the same requests, reading each event line and ``json.loads`` of it,
  nothing else.

It prints streamed tokens/s of both and their ratio. Targets: at least 40,000 tokens/s (about
7x the best figure in the seeds) and at least 0.8x the bare loop.

Run: ``python bench/client_capacity.py [--concurrency 1024] [--output-len 128] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.pacing_server import PacingServer
from tuner.loadgen import LevelSpec, make_prompts, run_level
from tuner.loadgen._apis import api_format

TARGET_TOKENS_PER_S = 40_000
TARGET_RATIO = 0.8


WARMUP_OUTPUT_LEN = 16  # what the full client's warm-up requests ask for


@dataclass(frozen=True)
class Measurement:
    """One measurement: streamed tokens/s over the timed part, and the client's CPU seconds
    over the whole call (warm-up of the same size included in both clients)."""

    tokens: int
    tokens_per_s: float
    cpu_s: float

    @property
    def tokens_per_cpu_s(self) -> float:
        return self.tokens / self.cpu_s


async def bare_loop(
    url: str, concurrency: int, warm: list[bytes], bodies: list[bytes]
) -> tuple[int, float]:
    """Stream ``warm`` (untimed, to open the connections), then every body, with
    ``concurrency`` workers that only read each event line and ``json.loads`` it.

    Returns:
        (events received in the timed part, its seconds).
    """
    headers = {"Content-Type": "application/json"}
    received = 0

    async def worker(session: aiohttp.ClientSession, queue: list[bytes]) -> None:
        nonlocal received
        while queue:
            async with session.post(url, data=queue.pop(), headers=headers) as response:
                async for line in response.content:
                    if line.startswith(b"data:") and not line.startswith(b"data: [DONE]"):
                        json.loads(line[5:])
                        received += 1

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector, read_bufsize=1 << 20) as session:
        await asyncio.gather(*(worker(session, warm) for _ in range(concurrency)))
        received = 0
        queue = bodies[::-1]
        started = time.perf_counter()
        await asyncio.gather(*(worker(session, queue) for _ in range(concurrency)))
        return received, time.perf_counter() - started


def measure_bare(
    url: str, api: str, concurrency: int, requests: int, input_len: int, output_len: int, seed: int
) -> Measurement:
    cpu_started = time.process_time()
    fmt = api_format(api)
    warm = [
        json.dumps(fmt.body(p, WARMUP_OUTPUT_LEN, "pacing-model", True)).encode()
        for p in make_prompts(concurrency, input_len, [seed, 1], api=api)
    ]
    bodies = [
        json.dumps(fmt.body(p, output_len, "pacing-model", True)).encode()
        for p in make_prompts(requests, input_len, [seed, 0], api=api)
    ]
    events, seconds = asyncio.run(bare_loop(url + fmt.path, concurrency, warm, bodies))
    tokens = requests * output_len
    # One event a token; OpenAI streams add one usage-only event a request.
    assert events in (tokens, tokens + requests), (events, tokens)
    return Measurement(tokens, tokens / seconds, time.process_time() - cpu_started)


def measure_full(
    url: str, api: str, concurrency: int, requests: int, input_len: int, output_len: int, seed: int
) -> Measurement:
    cpu_started = time.process_time()
    spec = LevelSpec(
        concurrency=concurrency,
        num_requests=requests,
        input_len=input_len,
        output_len=output_len,
        time_limit_s=600,
        warmup=concurrency,
        seed=seed,
    )
    metrics = asyncio.run(run_level(url, spec, api=api))
    assert metrics.clean() and metrics.output_tokens == requests * output_len, metrics
    return Measurement(
        metrics.output_tokens, metrics.output_throughput, time.process_time() - cpu_started
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=1024)
    parser.add_argument("--requests", type=int, default=4096, help="per measurement")
    parser.add_argument("--input-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=128)
    parser.add_argument("--api", default="sglang", choices=["sglang", "openai", "openai-chat"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--events-per-write", type=int, default=16)
    args = parser.parse_args()

    full: list[Measurement] = []
    bare: list[Measurement] = []
    with PacingServer(ttft_ms=0, itl_ms=0, events_per_write=args.events_per_write) as server:
        for round_index in range(args.rounds):
            common = (
                server.url,
                args.api,
                args.concurrency,
                args.requests,
                args.input_len,
                args.output_len,
                round_index,
            )
            bare.append(measure_bare(*common))
            full.append(measure_full(*common))
            print(
                f"round {round_index + 1}: full client {full[-1].tokens_per_s:,.0f} tokens/s "
                f"({full[-1].tokens_per_cpu_s:,.0f} per client CPU-s), bare loop "
                f"{bare[-1].tokens_per_s:,.0f} tokens/s "
                f"({bare[-1].tokens_per_cpu_s:,.0f} per client CPU-s)",
                flush=True,
            )
    best_full = max(m.tokens_per_s for m in full)
    best_bare = max(m.tokens_per_s for m in bare)
    ratio = statistics.median(f.tokens_per_s / b.tokens_per_s for f, b in zip(full, bare))
    cpu_ratio = statistics.median(
        f.tokens_per_cpu_s / b.tokens_per_cpu_s for f, b in zip(full, bare)
    )
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(
        f"machine: {os.cpu_count()} cores, load average {load} at the end, "
        f"Python {platform.python_version()}, aiohttp {aiohttp.__version__}; "
        f"server: one process, {args.events_per_write} events a write, one token an event"
    )
    print(
        f"workload: {args.concurrency} concurrent streams, {args.requests} requests of "
        f"{args.input_len} in / {args.output_len} out per measurement, api {args.api}"
    )
    print(
        f"full client: {best_full:,.0f} streamed tokens/s (best of {args.rounds}; "
        f"target >= {TARGET_TOKENS_PER_S:,}): "
        f"{'PASS' if best_full >= TARGET_TOKENS_PER_S else 'FAIL'}"
    )
    print(f"bare loop:   {best_bare:,.0f} streamed tokens/s (best of {args.rounds})")
    print(
        f"ratio full/bare: {ratio:.2f} in tokens/s, {cpu_ratio:.2f} in tokens per client "
        f"CPU-second (medians of rounds; target >= {TARGET_RATIO}): "
        f"{'PASS' if min(ratio, cpu_ratio) >= TARGET_RATIO else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
