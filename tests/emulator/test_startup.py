"""The start-up log of real emulated servers: SGLang's lines, in order, at the calibration's
pace divided by the time scale; the autotune line only with the patched gate and cutlass MoE."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from tests.support.emulator import BASE_ARGV, Emulator, patch_gate
from tuner.emulator import prepare_host_root
from tuner.emulator.calibration import STARTUP
from tuner.engines import load_profile
from tuner.signals import LogObserver, level_figures

AUTOTUNE = "Running FlashInfer autotune..."
TRTLLM = ["--moe-runner-backend", "flashinfer_trtllm"]


def start_log(tmp_path: Path, extra: list[str], patched: bool, time_scale: float = 200.0,
              ) -> tuple[str, float]:
    """The log of a server that reached readiness, and the seconds from its first start-up
    line to ``/health`` = 200."""
    root = tmp_path / f"host-{time.monotonic_ns()}"
    env = prepare_host_root(root)
    if patched:
        patch_gate(root / "site")
    with Emulator([*BASE_ARGV, *extra], tmp_path, env=env, time_scale=time_scale) as emu:
        while "Load weight begin" not in emu.log():
            assert emu.returncode is None, emu.log()
            time.sleep(0.005)
        began = time.monotonic()
        assert emu.wait_ready(60), emu.log()
        return emu.log(), time.monotonic() - began


def test_the_start_up_prints_sglangs_lines_in_order(tmp_path: Path) -> None:
    log, _ = start_log(tmp_path, [], patched=True)
    shards = re.findall(r"Loading safetensors checkpoint shards: +\d+% Completed \| (\d+)/(\d+)",
                        log)
    assert [int(done) for done, _ in shards] == list(range(1, STARTUP.shards + 1))
    assert {total for _, total in shards} == {str(STARTUP.shards)}
    order = ["Load weight begin", "Load weight end", "KV Cache is allocated. #tokens: 495488",
             AUTOTUNE, "FlashInfer autotune completed.", "Capture cuda graph begin.",
             "Capture cuda graph end.", "The server is fired up and ready to roll!"]
    positions = [log.find(line) for line in order]
    assert min(positions) >= 0 and positions == sorted(positions), positions
    assert "EMULATED GLM-5 host" in log.splitlines()[0]


@pytest.mark.parametrize(("extra", "patched", "autotune"), [
    ([], False, False),
    (TRTLLM, True, False),
    (["--disable-flashinfer-autotune"], True, False),
    (["--disable-cuda-graph"], True, True),
])
def test_autotune_runs_only_with_the_patched_gate_and_cutlass(
    tmp_path: Path, extra: list[str], patched: bool, autotune: bool
) -> None:
    log, _ = start_log(tmp_path, extra, patched)
    assert (AUTOTUNE in log) is autotune
    assert ("Capture cuda graph begin." in log) is ("--disable-cuda-graph" not in extra)


def test_the_start_up_takes_the_calibration_time_divided_by_k(tmp_path: Path) -> None:
    _, fast = start_log(tmp_path, [], patched=True, time_scale=200.0)
    _, slow = start_log(tmp_path, [], patched=True, time_scale=50.0)
    low, high = STARTUP.total_s
    assert 0.8 * low / 50 < slow < 1.5 * high / 50 + 1.0
    assert slow > 2.0 * fast  # four times slower in theory; process noise on top


@pytest.mark.parametrize(("extra", "largest"), [
    ([], 512),  # SGLang 0.5.9's own choice for TP8 on these cards
    (["--cuda-graph-max-bs", "256", "--max-running-requests", "100"], 100),  # none above the pool
])
def test_the_captured_batch_sizes_are_logged_as_sglang_does(
    tmp_path: Path, extra: list[str], largest: int
) -> None:
    """What the sglang profile reads as ``graph_max_bs``: SGLang's list, cut at the request pool."""
    log, _ = start_log(tmp_path, extra, patched=False)
    line = next(x for x in log.splitlines() if "Capture cuda graph bs [" in x)
    sizes = [int(v) for v in line.partition("bs [")[2].rstrip("]").split(", ")]
    assert sizes[:6] == [1, 2, 4, 8, 12, 16] and sizes == sorted(sizes) and max(sizes) == largest
    observer = LogObserver(load_profile("sglang").log_observations)
    for text in log.splitlines():
        observer.feed(text, "starting")
    assert level_figures(observer, "level-64", 64)["graph_max_bs"] == largest
