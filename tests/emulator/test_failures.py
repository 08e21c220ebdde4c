"""Failures as SGLang shows them: crash and OOM under load, OOM and crashes at start, refusals,
wrong output, bad flags. Every server is a real process, loaded through the tuner's client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.emulator import BASE_ARGV, REPO, Emulator, patch_gate, post_json
from tuner.emulator import prepare_host_root
from tuner.loadgen import LevelMetrics, LevelSpec, run_level

K = 200.0


def level(emulator: Emulator, concurrency: int, output_len: int = 16) -> LevelMetrics:
    spec = LevelSpec(concurrency=concurrency, num_requests=2 * concurrency, input_len=256,
                     output_len=output_len, time_limit_s=3000)
    return asyncio.run(run_level(emulator.base_url, spec, api="sglang"))


def wait_for_line(emulator: Emulator, text: str, timeout: float) -> float:
    """When ``text`` showed up in the log (``time.monotonic()``); fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in emulator.log():
            return time.monotonic()
        time.sleep(0.01)
    raise AssertionError(f"{text!r} not logged within {timeout} s:\n{emulator.log()[-3000:]}")


def lines_in_order(log: str, *texts: str) -> bool:
    positions = [log.find(text) for text in texts]
    return all(p >= 0 for p in positions) and positions == sorted(positions)


def test_n_off_crashes_at_512_with_the_prefill_metadata_traceback(tmp_path: Path) -> None:
    env = prepare_host_root(tmp_path / "host")
    patch_gate(tmp_path / "host/site")
    with Emulator([*BASE_ARGV, "--disable-cuda-graph"], tmp_path, env=env, time_scale=K) as emu:
        assert emu.wait_ready(30), emu.log()
        calm = level(emu, 256)
        assert calm.completed == 512 and calm.stop_reason is None
        crashed = level(emu, 512)
        seen = wait_for_line(emu, "Scheduler hit an exception:", 10)
        code = emu.wait_exit(10)
        exited = time.monotonic()
        log = emu.log()
    assert code != 0 and exited - seen < 2.0
    assert crashed.completed < 1024 and crashed.stop_reason is not None
    assert lines_in_order(
        log, "Scheduler hit an exception: Traceback (most recent call last):",
        "AttributeError: 'PrefillMetadata' object has no attribute 'topk_indices'",
        "SIGQUIT received.", "It usually means one child failed.")


def test_out_of_memory_under_load_at_1024_only(tmp_path: Path) -> None:
    env = prepare_host_root(tmp_path / "host")
    patch_gate(tmp_path / "host/site")
    argv = [*BASE_ARGV, "--mem-fraction-static", "0.95"]
    with Emulator(argv, tmp_path, env=env, time_scale=K) as emu:
        assert emu.wait_ready(30), emu.log()  # a configuration that starts...
        assert level(emu, 512).completed == 1024
        broken = level(emu, 1024)  # ...is not thereby stable
        wait_for_line(emu, "torch.OutOfMemoryError: CUDA out of memory", 10)
        code = emu.wait_exit(10)
        log = emu.log()
    assert code != 0 and broken.stop_reason is not None
    assert lines_in_order(log, "Scheduler hit an exception:", "forward_decode",
                          "torch.OutOfMemoryError: CUDA out of memory", "SIGQUIT received.")


def test_out_of_memory_at_start_in_cuda_graph_capture(tmp_path: Path) -> None:
    argv = [*BASE_ARGV, "--mem-fraction-static", "0.96"]
    with Emulator(argv, tmp_path, time_scale=K) as emu:
        assert emu.wait_ready(30) is False
        assert emu.wait_exit(10) == 1
        log = emu.log()
    assert lines_in_order(log, "KV Cache is allocated. #tokens:", "Capture cuda graph begin.",
                          "Capture cuda graph failed: CUDA out of memory")
    assert "fired up and ready to roll" not in log


def test_a_startup_check_refuses_before_anything_loads(tmp_path: Path) -> None:
    argv = [*BASE_ARGV, "--quantization", "fp8"]  # flashinfer_cutlass takes modelopt only
    with Emulator(argv, tmp_path, time_scale=K) as emu:
        assert emu.wait_exit(20) == 1
        log = emu.log()
    assert "AssertionError: Invalid quantization 'fp8'. FlashInfer Cutlass MOE supports only:" in log
    assert "Traceback (most recent call last):" in log and "server_args.py" in log
    assert "Load weight begin" not in log


def test_a_kernel_missing_on_sm120_crashes_after_loading(tmp_path: Path) -> None:
    argv = [*BASE_ARGV[:-2], "--attention-backend", "nsa"]
    with Emulator(argv, tmp_path, time_scale=K) as emu:
        assert emu.wait_exit(30) == 1
        log = emu.log()
    assert lines_in_order(log, "Load weight end.", "Scheduler hit an exception:",
                          "RuntimeError: deep_gemm.get_paged_mqa_logits_metadata",
                          "SIGQUIT received.")


def test_a_patched_gate_that_no_longer_parses_fails_like_an_import(tmp_path: Path) -> None:
    env = prepare_host_root(tmp_path / "host")
    gate = tmp_path / "host/site/sglang/srt/model_executor/model_runner.py"
    gate.write_text(gate.read_text().replace('# "flashinfer_cutlass",', '"flashinfer_cutlass",,'))
    with Emulator(BASE_ARGV, tmp_path, env=env, time_scale=K) as emu:
        assert emu.wait_exit(20) == 1
        log = emu.log()
    assert str(gate) in log and "SyntaxError:" in log and "SIGQUIT received." in log


def test_fa3_serves_garbage_that_a_probe_can_tell_from_the_baseline(tmp_path: Path) -> None:
    prompt = {"input_ids": list(range(1000, 1040)), "sampling_params": {
        "max_new_tokens": 32, "ignore_eos": True, "temperature": 0}}
    texts = {}
    for name, argv in (("B", [*BASE_ARGV[:-4], "--moe-runner-backend", "flashinfer_trtllm",
                              "--attention-backend", "flashinfer",
                              "--max-running-requests", "64"]),
                       ("N-on", list(BASE_ARGV)),
                       ("fa3", [*BASE_ARGV[:-2], "--attention-backend", "fa3"])):
        with Emulator(argv, tmp_path, time_scale=K) as emu:
            assert emu.wait_ready(30), emu.log()
            status, raw = post_json(f"{emu.base_url}/generate", prompt)
            assert status == 200
            texts[name] = json.loads(raw)["text"]
            if name == "fa3":
                assert level(emu, 64).completed == 128  # garbage at full speed, no crash
    assert texts["B"] == texts["N-on"]  # greedy output does not depend on the configuration
    assert texts["fa3"] != texts["B"] and set(texts["fa3"]) == {"!"}


def run_module(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner.emulator", *argv], capture_output=True,
                          text=True, timeout=60, cwd=str(REPO), stdin=subprocess.DEVNULL, check=False)


def test_unknown_flags_exit_2_as_argparse_does_and_help_lists_sglang_flags() -> None:
    unknown = run_module("--model-path", "/m", "--attn-dp-size", "2")
    assert unknown.returncode == 2 and "unrecognized arguments: --attn-dp-size" in unknown.stderr
    bad_choice = run_module("--model-path", "/m", "--moe-runner-backend", "megamoe")
    assert bad_choice.returncode == 2 and "invalid choice: 'megamoe'" in bad_choice.stderr
    shown = run_module("--help")
    assert shown.returncode == 0
    for flag in ("--tp-size", "--tensor-parallel-size", "--cuda-graph-max-bs",
                 "--enable-flashinfer-allreduce-fusion", "--schedule-conservativeness",
                 "--nsa-prefill-backend", "--time-scale"):
        assert flag in shown.stdout, flag


@pytest.mark.parametrize("prefix", ["--tp", "--mem-frac"])
def test_unique_prefixes_work_like_sglang(prefix: str) -> None:
    from tuner.emulator.cli_args import parse_server_args

    value = "8" if prefix == "--tp" else "0.9"
    parsed = parse_server_args(["--model", "/m", prefix, value])
    assert parsed["tp_size" if prefix == "--tp" else "mem_fraction_static"] == float(value)
