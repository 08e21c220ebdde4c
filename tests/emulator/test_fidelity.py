"""Emulated levels measure the emulator's model, at 1,024 concurrent requests too, and a level
measured beside a busy loop on the same cores either still does or says it is measurement-bound.

The demo's workload (search_spaces/glm5.yaml, emulated): 256 in / 256 out, one wave of c
requests, time scale 200, 64 tokens an event. The model is ``predict_throughput`` for the same
configuration and level, without noise; the server's noise is within +-6.5%, so +-10% holds.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.emulator import Emulator, prepare_calibration_host
from tuner.emulator import predict_throughput
from tuner.emulator.calibration import point
from tuner.emulator.fit import _flags
from tuner.loadgen import LevelMetrics, LevelSpec, run_level

TIME_SCALE = 200.0
TOLERANCE = 0.10


def measure(tmp_path: Path, point_id: str, concurrency: int) -> tuple[LevelMetrics, float]:
    row = point(point_id)
    env = prepare_calibration_host(row, tmp_path / "host")
    spec = LevelSpec(concurrency=concurrency, num_requests=concurrency, input_len=256,
                     output_len=256, time_limit_s=36_000, warmup=8)
    with Emulator([*row.full_argv(), "--stream-interval", "64"], tmp_path, env=env,
                  time_scale=TIME_SCALE, seed=3) as server:
        assert server.wait_ready(120)
        metrics = asyncio.run(run_level(server.base_url, spec))
    model = predict_throughput(_flags(row), row.patched_gate, row.forced_allreduce, concurrency,
                               256, 256, num_requests=concurrency)
    return metrics, float(model)


@pytest.mark.parametrize(("point_id", "concurrency"), [("N-on", 1024), ("B", 1024)])
def test_a_level_of_1024_measures_the_model(tmp_path: Path, point_id: str,
                                            concurrency: int) -> None:
    metrics, model = measure(tmp_path, point_id, concurrency)
    print(f"{point_id} c={concurrency}: {metrics.output_throughput:,.0f} tok/s (emulated), "
          f"model {model:,.0f}, health {metrics.client_health}")
    assert metrics.clean() and metrics.completed == concurrency
    assert metrics.emulated and metrics.client_health["clock"] == "emulator"
    assert metrics.measurement_bound is None
    assert metrics.output_throughput == pytest.approx(model, rel=TOLERANCE)


def test_beside_a_busy_loop_a_level_is_true_or_flagged(tmp_path: Path) -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        metrics, model = measure(tmp_path, "N-on", 1024)
    finally:
        busy.kill()
        busy.wait()
    print(f"N-on c=1024 beside a busy loop: {metrics.output_throughput:,.0f} tok/s (emulated), "
          f"model {model:,.0f}, measurement-bound: {metrics.measurement_bound}, "
          f"health {metrics.client_health}")
    assert metrics.clean() and metrics.completed == 1024
    true = metrics.output_throughput == pytest.approx(model, rel=TOLERANCE)
    assert true or metrics.measurement_bound is not None
