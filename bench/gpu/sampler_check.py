"""The level's GPU sampler on a real GPU: how long nvidia-smi takes to give its first row, and
which samples a level counts (``tuner.telemetry``). Run on the GPU machine (see sampler_check.sh).

Three "levels" of a matrix-multiply load on GPU 0, each inside ``GpuSampler`` as a trial's level
runs inside it:

1. ``long``: 2 s idle, 4 s busy, 2 s idle (a client that starts late and a drain): the idle ticks
   before and after are left out, the busy ones stay;
2. ``short``: 0.4 s busy right after entering (an emulated level, K times faster), sampled every
   50 ms: with the wait for the first row, and without it (``first_sample_s=0``: the sampler
   enters at once);
3. ``pause``: 2 s busy, 1.5 s idle, 2 s busy: the pause inside stays (a real host), or goes
   (``busy_only``, an emulated host's rule).

Prints one line per case: seconds to enter (the wait for nvidia-smi's first row), ticks sampled
and kept, the mean power of all samples and of the kept ones, and the power of GPU 0 while busy.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time

import torch

import tuner.telemetry as telemetry
from tuner.host import LocalHost
from tuner.telemetry import GpuSampler, summarise

RAW: list[list[telemetry.GpuSample]] = []
_trim = telemetry.busy_span


def _recording(samples, **kwargs):  # keeps what nvidia-smi wrote, before the trim
    RAW.append(list(samples))
    return _trim(samples, **kwargs)


telemetry.busy_span = _recording


def busy(seconds: float) -> None:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _ in range(8):
            a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()


def case(name: str, host: LocalHost, plan: list[tuple[str, float]], **sampler: object) -> dict:
    started = time.monotonic()
    with GpuSampler(host, gpus=frozenset({0}), **sampler) as s:
        entered = time.monotonic() - started
        for what, seconds in plan:
            busy(seconds) if what == "busy" else time.sleep(seconds)
    raw = RAW[-1] if RAW else []
    kept = s.samples
    every = summarise(raw)
    busy_power = [x.power_draw_w for x in raw if (x.utilization_pct or 0) > 0 and x.power_draw_w]
    row = {
        "case": name, "sampler": {k: v for k, v in sampler.items()}, "enter_s": round(entered, 3),
        "ticks": len(raw), "kept": len(kept),
        "utilisation": [int(x.utilization_pct or 0) for x in raw],
        "mean_w_all": round(every.mean_power_w, 1) if every else None,
        "mean_w_kept": round(s.summary.mean_power_w, 1) if s.summary else None,
        "busy_w": round(sum(busy_power) / len(busy_power), 1) if busy_power else None,
    }
    print(json.dumps(row), flush=True)
    return row


def main() -> int:
    busy(1.0)  # CUDA context and kernels up before any timing
    time.sleep(3.0)
    host = LocalHost(tempfile.mkdtemp(prefix="sampler-check-"))
    rows = [
        case("long", host, [("idle", 2.0), ("busy", 4.0), ("idle", 2.0)]),
        case("short, waits", host, [("busy", 0.4)], interval_ms=50),
        case("short, no wait", host, [("busy", 0.4)], interval_ms=50, first_sample_s=0.0),
        case("pause", host, [("busy", 2.0), ("idle", 1.5), ("busy", 2.0)]),
        case("pause, busy_only", host, [("busy", 2.0), ("idle", 1.5), ("busy", 2.0)], busy_only=True),
    ]
    json.dump(rows, sys.stdout if len(sys.argv) < 2 else open(sys.argv[1], "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
