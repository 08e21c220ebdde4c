"""One pilot call on the GPU machine: what `transformers serve` does there, captured as fixtures.

Run there (bench/gpu/pilot.sh): for a few launch configurations it starts the real server in its
own process group, times start to ``/health`` 200, sends a completion, a streamed one (raw bytes
kept), the strict server's refusals, a burst of concurrent streams while sampling ``nvidia-smi``
(memory, power), stops the group and times the GPU memory's release. Everything lands in OUT.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp

OUT = Path(sys.argv[1])
MODEL = sys.argv[2]
PORT = 8011
BASE = f"http://127.0.0.1:{PORT}"
SMI = ["nvidia-smi", "--query-gpu=index,memory.used,power.draw,utilization.gpu", "--format=csv,noheader,nounits"]


def smi() -> str:
    return subprocess.run(SMI, capture_output=True, text=True).stdout.strip()


async def burst(session, n: int, tokens: int) -> dict:
    words = " ".join(f"w{100 + i}" for i in range(128))

    async def one(i: int) -> tuple[float, int, str]:
        body = {"model": MODEL, "prompt": f"w{3 + i} " + words, "max_tokens": tokens,
                "temperature": 0.0, "stream": True}
        t0 = time.perf_counter()
        chunks, last = 0, ""
        async with session.post(BASE + "/v1/completions", json=body) as r:
            async for line in r.content:
                s = line.decode().strip()
                if s.startswith("data:"):
                    chunks += 1
                    last = s
        return time.perf_counter() - t0, chunks, last[-200:]

    t0 = time.perf_counter()
    results = await asyncio.gather(*(one(i) for i in range(n)))
    wall = time.perf_counter() - t0
    return {"n": n, "tokens": tokens, "wall_s": round(wall, 2),
            "tok_s": round(n * tokens / wall, 1),
            "chunks": sorted({c for _, c, _ in results}), "last": results[0][2]}


async def probe(name: str, flags: list[str], budget_s: float, load: bool = True) -> dict:
    log_path = OUT / f"serve-{name}.log"
    cmd = ["transformers", "serve", MODEL, "--host", "127.0.0.1", "--port", str(PORT), *flags]
    rec: dict = {"name": name, "cmd": cmd, "smi_before": smi()}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    t0 = time.monotonic()
    ready = None
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as s:
        while time.monotonic() - t0 < budget_s and proc.poll() is None:
            try:
                async with s.get(BASE + "/health") as r:
                    if r.status == 200:
                        ready = time.monotonic() - t0
                        break
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.25)
        rec["ready_s"] = None if ready is None else round(ready, 1)
        rec["exit_code"] = proc.poll()
        if ready is not None:
            rec["smi_ready"] = smi()
            for path in ["/v1/models", "/health"]:
                async with s.get(BASE + path) as r:
                    rec[f"GET {path}"] = [r.status, (await r.text())[:300]]
            for label, extra in [("plain", {}), ("ignore_eos", {"ignore_eos": True}),
                                 ("ids", {"prompt": [5, 6, 7, 8]})]:
                body = {"model": MODEL, "prompt": "w5 w6 w7 w8", "max_tokens": 8, "temperature": 0.0}
                body.update(extra)
                t1 = time.perf_counter()
                async with s.post(BASE + "/v1/completions", json=body) as r:
                    rec[f"POST {label}"] = [r.status, (await r.text())[:400], round(time.perf_counter() - t1, 2)]
            body = {"model": MODEL, "prompt": "w5 w6 w7 w8", "max_tokens": 6, "temperature": 0.0,
                    "stream": True, "stream_options": {"include_usage": True}}
            async with s.post(BASE + "/v1/completions", json=body) as r:
                raw = await r.read()
                rec["stream_status"] = r.status
                (OUT / f"stream-{name}.txt").write_bytes(raw)
            chat = {"model": MODEL, "messages": [{"role": "user", "content": "w5 w6"}],
                    "max_tokens": 6, "temperature": 0.0, "stream": True}
            async with s.post(BASE + "/v1/chat/completions", json=chat) as r:
                (OUT / f"chatstream-{name}.txt").write_bytes(await r.read())
            samples: list[str] = []

            async def sample() -> None:
                while True:
                    samples.append(smi())
                    await asyncio.sleep(0.5)

            task = asyncio.create_task(sample())
            try:
                if not load:
                    raise RuntimeError("no load asked for this configuration")
                rec["burst16"] = await asyncio.wait_for(burst(s, 16, 64), 120)
                rec["burst64"] = await asyncio.wait_for(burst(s, 64, 128), 60)
            except Exception as e:  # noqa: BLE001 - a pilot records what happened
                rec["burst_error"] = repr(e)
            task.cancel()
            rec["smi_load"] = samples
    t_stop = time.monotonic()
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    rec["exit_after_term_s"] = round(time.monotonic() - t_stop, 1)
    released = []
    for _ in range(40):
        used = smi()
        released.append(used)
        if used.split(",")[1].strip() in ("0", "1"):
            break
        time.sleep(0.25)
    rec["memory_released_s"] = round(time.monotonic() - t_stop, 1)
    rec["smi_after"] = released[-3:]
    rec["log_tail"] = log_path.read_text(errors="replace")[-1500:]
    print(json.dumps({k: rec[k] for k in ("name", "ready_s", "exit_code", "memory_released_s")}
                     | {"tok_s": [rec.get("burst16", {}).get("tok_s"), rec.get("burst64", {}).get("tok_s")]}),
          flush=True)
    return rec


async def main() -> None:
    configs = [
        ("cb", ["--continuous-batching", "--log-level", "info"], 120),
        ("cb-graph", ["--continuous-batching", "--cb-use-cuda-graph"], 120),
        ("cb-eager", ["--continuous-batching", "--attn-implementation", "eager"], 120),
        ("paged-bad", ["--continuous-batching", "--attn-implementation", "sdpa_paged"], 60),
        ("oom-blocks", ["--continuous-batching", "--cb-num-blocks", "4000000"], 90),
        ("oom-mem", ["--continuous-batching", "--cb-max-memory-percent", "0.99", "--cb-max-batch-tokens", "65536"], 90),
        ("compile", ["--continuous-batching", "--compile"], 150),
        ("none", [], 90, False),
    ]
    results = []
    for name, flags, budget, *load in configs:
        results.append(await probe(name, flags, budget, *load))
        (OUT / "pilot.json").write_text(json.dumps(results, indent=1))


asyncio.run(main())
