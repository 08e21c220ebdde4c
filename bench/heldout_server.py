"""A held-out batch server that speaks SGLang's API, for ``bench/client_bound_study.py``.

Nobody here tuned to it: its speed is not the emulator's model nor one of the search benchmark's
landscapes. It is a real HTTP server (``/generate`` streamed as SSE, ``/health``,
``/server_info``, ``/get_server_info``, ``/v1/models``) whose scheduler runs decode steps: each
step gives one token to every running request (at most ``--max-running-requests``; the rest
wait in a queue) and lasts :func:`step_ms` of the running count, so its throughput saturates with
concurrency. Five SGLang launch flags change the step, with effects of a few percent to 2x.
Each start draws one speed factor (mean 1, sd ``--noise``, 2%) from ``--random-seed`` and its
process id: the run-to-run noise. Its log prints no decode lines.

:func:`model_throughput` is the same model without noise, the server's own figure that a
study's export is judged by.

Run: ``python bench/heldout_server.py --port 30000 --max-running-requests 64``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
from dataclasses import dataclass

__all__ = ["Config", "model_throughput", "step_ms", "SPACE"]

# The flags a search space may search, with the values this bench's space offers.
SPACE: dict[str, list] = {
    "max_running_requests": [16, 32, 64, 128, 256, 512],
    "cuda_graph_max_bs": [32, 64, 128, 256, 512],
    "schedule_policy": ["fcfs", "lpm", "random", "dfs-weight"],
    "num_continuous_decode_steps": [1, 2, 4],
    "chunked_prefill_size": [1024, 2048, 4096, 8192],
}

BASE_MS = 3.0          # a decode step's fixed cost (launch, sampling)
PER_REQUEST_MS = 0.16  # its cost per running request
EAGER_PENALTY = 1.25   # a batch above the captured CUDA graphs runs eager: per-request cost x this
POLICY = {"fcfs": 1.0, "lpm": 0.97, "random": 1.04, "dfs-weight": 0.99}  # step time x this
PREFILL_MS = {1024: 0.06, 2048: 0.04, 4096: 0.03, 8192: 0.035}  # each admitted request's prefill


@dataclass(frozen=True)
class Config:
    """The flags the model reads (SGLang's defaults where unset)."""

    max_running_requests: int = 64
    cuda_graph_max_bs: int = 64
    schedule_policy: str = "fcfs"
    num_continuous_decode_steps: int = 1
    chunked_prefill_size: int = 2048


def step_ms(config: Config, running: int) -> float:
    """One decode step's duration with ``running`` requests in the batch (noise-free)."""
    per_request = PER_REQUEST_MS * (EAGER_PENALTY if running > config.cuda_graph_max_bs else 1.0)
    # continuous decode steps spread the step's fixed cost over several tokens
    base = BASE_MS / config.num_continuous_decode_steps ** 0.5
    return (base + per_request * running) * POLICY[config.schedule_policy]


def model_throughput(config: Config, concurrency: int, output_len: int) -> float:
    """Output tok/s a closed loop of ``concurrency`` clients gets, noise-free and steady-state.

    Each request costs ``output_len`` steps of the running batch plus its prefill (paid in
    the step that admits it)."""
    running = min(concurrency, config.max_running_requests)
    per_token_s = (step_ms(config, running) + PREFILL_MS[config.chunked_prefill_size] * running / output_len) / 1e3
    return running / per_token_s


class _Engine:
    """The scheduler: a queue, a running batch, one decode step after another."""

    def __init__(self, config: Config, speed: float) -> None:
        self.config, self.speed = config, speed
        self.waiting: list[tuple[int, asyncio.Queue]] = []
        self.wake = asyncio.Event()

    async def run(self) -> None:
        running: list[list] = []  # [tokens left, queue, tokens sent]
        loop = asyncio.get_running_loop()
        due = loop.time()
        while True:
            if not running and not self.waiting:
                self.wake.clear()
                await self.wake.wait()
                due = loop.time()
            admitted = 0
            while self.waiting and len(running) < self.config.max_running_requests:
                tokens, queue = self.waiting.pop(0)
                running.append([tokens, queue, 0])
                admitted += 1
            duration = step_ms(self.config, len(running)) + PREFILL_MS[self.config.chunked_prefill_size] * admitted
            due += duration / 1e3 / self.speed
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            else:
                due = loop.time()  # behind (the machine was busy): no catching up in a burst
            for entry in running:
                entry[0] -= 1
                entry[2] += 1
                entry[1].put_nowait(entry[2])
            running = [entry for entry in running if entry[0] > 0]

    def submit(self, tokens: int) -> asyncio.Queue:
        queue: asyncio.Queue = asyncio.Queue()
        self.waiting.append((tokens, queue))
        self.wake.set()
        return queue


def _token(seed: int, index: int) -> str:
    return f" t{(seed * 31 + index) % 89}"


async def _handle(engine: _Engine, model: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path = lines[0].split(" ")[:2]
            length = next((int(line.split(":", 1)[1]) for line in lines[1:]
                           if line.lower().startswith("content-length:")), 0)
            body = json.loads(await reader.readexactly(length)) if length else {}
            path = path.split("?")[0]
            if method == "POST" and path == "/generate":
                await _generate(engine, body, writer)
                continue
            documents = {
                "/health": {},
                "/server_info": {"version": "heldout-0.1", "max_running_requests": engine.config.max_running_requests},
                "/get_server_info": {"version": "heldout-0.1"},
                "/v1/models": {"object": "list", "data": [{"id": model}]},
            }
            status = 200 if path in documents else 404
            payload = json.dumps(documents.get(path, {"error": f"{path} not found"})).encode()
            writer.write(f"HTTP/1.1 {status} {'OK' if status == 200 else 'Not Found'}\r\nContent-Type: "
                         f"application/json\r\nContent-Length: {len(payload)}\r\n\r\n".encode() + payload)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _generate(engine: _Engine, body: dict, writer: asyncio.StreamWriter) -> None:
    prompt = body.get("input_ids") or str(body.get("text", "")).split()
    tokens = int(body["sampling_params"]["max_new_tokens"])
    seed = sum(p if isinstance(p, int) else len(p) for p in prompt)
    queue = engine.submit(tokens)
    text = ""
    if not body.get("stream"):
        while (sent := await queue.get()) < tokens:
            pass
        text = "".join(_token(seed, i) for i in range(tokens))
        payload = json.dumps({"text": text, "meta_info": {"prompt_tokens": len(prompt),
                                                           "completion_tokens": tokens}}).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(payload), payload))
        await writer.drain()
        return
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    sent = 0
    while sent < tokens:
        sent = await queue.get()
        text += _token(seed, sent - 1)
        event = {"text": text, "meta_info": {"id": "r", "prompt_tokens": len(prompt), "completion_tokens": sent,
                                             "finish_reason": {"type": "length"} if sent == tokens else None}}
        data = b"data: " + json.dumps(event).encode() + b"\n\n"
        writer.write(b"%x\r\n%s\r\n" % (len(data), data))
        await writer.drain()
    writer.write(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
    await writer.drain()


async def _serve(options: argparse.Namespace) -> None:
    config = Config(options.max_running_requests, options.cuda_graph_max_bs, options.schedule_policy,
                    options.num_continuous_decode_steps, options.chunked_prefill_size)
    speed = random.Random(f"{options.random_seed}-{os.getpid()}").gauss(1.0, options.noise)
    engine = _Engine(config, speed)
    asyncio.ensure_future(engine.run())
    server = await asyncio.start_server(lambda r, w: _handle(engine, options.model_path, r, w),
                                        options.host, options.port, backlog=4096)
    port = server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)  # --port 0: the port it took (tests/support/child_server.py)
    print(f"heldout server {config} on {options.host}:{port}", flush=True)
    print("The server is fired up and ready to roll!", flush=True)
    async with server:
        await server.serve_forever()


def main(argv: list[str] | None = None) -> None:
    """Parse SGLang-named flags and serve until stopped."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--model-path", default="heldout-model")
    parser.add_argument("--max-running-requests", type=int, default=Config.max_running_requests)
    parser.add_argument("--cuda-graph-max-bs", type=int, default=Config.cuda_graph_max_bs)
    parser.add_argument("--schedule-policy", choices=sorted(POLICY), default=Config.schedule_policy)
    parser.add_argument("--num-continuous-decode-steps", type=int, default=Config.num_continuous_decode_steps)
    parser.add_argument("--chunked-prefill-size", type=int, choices=sorted(PREFILL_MS),
                        default=Config.chunked_prefill_size)
    parser.add_argument("--random-seed", type=int, default=0)
    parser.add_argument("--noise", type=float, default=0.02, help="run-to-run speed sd (a share)")
    options = parser.parse_args(argv)
    try:
        asyncio.run(_serve(options))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
