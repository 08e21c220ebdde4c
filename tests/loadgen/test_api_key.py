"""Every client of the tuner sends the server's API key, against an emulated server enforcing it.

The emulator refuses a request without ``Authorization: Bearer KEY`` with 401, as SGLang 0.5.9's
``--api-key`` does (``tests/emulator/test_api_key.py``). The probe, a level of the load
generator (in this process and shared by two client processes), ``tuner bench --api-key`` (the
value, or ``'${NAME}'`` read from the environment) and SGLang's own ``bench_serving`` (the
published 0.5.9 file, run by the adapter with the key in its environment) all get answers.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.emulator import Emulator, emulator_with_keys
from tests.support.tuner_bench import RUN_TUNER
from tuner.errors import TunerError
from tuner.loadgen import LevelSpec, auth_headers, run_level
from tuner.loadgen.bench_serving import run_bench_serving
from tuner.probe import run_probe

API_KEY = "sk-client-test-0b5d2e91"
VLLM_PYTHON = "/opt/tuner-venvs/vllm/bin/python"  # has transformers (bench_serving's tokenizer)
SPEC = LevelSpec(concurrency=4, num_requests=8, input_len=16, output_len=8, time_limit_s=120,
                 warmup=1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    with emulator_with_keys(tmp_path_factory.mktemp("host"), {"--api-key": API_KEY}) as emulator:
        assert emulator.wait_ready(30), emulator.log()
        yield emulator


def test_the_probe_sends_the_key(server: Emulator) -> None:
    result = run_probe(server.base_url, "sglang", ["The capital of France is"], 8, 30,
                       headers=auth_headers(API_KEY))
    assert len(result.outputs) == 1 and result.outputs[0]
    with pytest.raises(TunerError, match="HTTP 401"):
        run_probe(server.base_url, "sglang", ["The capital of France is"], 8, 30)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_level_sends_the_key_from_every_client_process(server: Emulator, workers: int) -> None:
    metrics = asyncio.run(run_level(server.base_url, SPEC, headers=auth_headers(API_KEY),
                                    client_workers=workers))
    assert (metrics.completed, metrics.failed, metrics.stop_reason) == (8, 0, None)
    assert metrics.emulated  # /server_info, behind the key too, was read
    refused = asyncio.run(run_level(server.base_url, SPEC, client_workers=workers))
    assert refused.completed == 0


def tuner_bench(url: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN_TUNER, "bench", url, "--concurrency", "4", "--num-prompts",
         "8", "--input-len", "16", "--output-len", "8", "--json", *args],
        capture_output=True, check=False, text=True, timeout=120, env={**os.environ, **env},
    )


def test_tuner_bench_sends_the_key_given_or_read_from_the_environment(server: Emulator) -> None:
    for args, env in ((["--api-key", "${TUNER_TEST_BENCH_KEY}"], {"TUNER_TEST_BENCH_KEY": API_KEY}),
                      (["--api-key", API_KEY], {})):
        done = tuner_bench(server.base_url, *args, env=env)
        assert done.returncode == 0, done.stderr
        level = json.loads(done.stdout)["levels"][0]
        assert (level["completed"], level["failed"]) == (8, 0)
        assert API_KEY not in done.stdout + done.stderr


def test_tuner_bench_with_an_unset_variable_is_a_one_line_error(server: Emulator) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TUNER_TEST_UNSET_KEY"}
    done = subprocess.run(
        [sys.executable, "-c", RUN_TUNER, "bench", server.base_url,
         "--api-key", "${TUNER_TEST_UNSET_KEY}"],
        capture_output=True, check=False, text=True, timeout=120, env=env,
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "tuner: error: --api-key: ${TUNER_TEST_UNSET_KEY} is not set in the environment; fix: export "
        "TUNER_TEST_UNSET_KEY=... (the server's --api-key) before running tuner bench")


@pytest.mark.skipif(not os.access(VLLM_PYTHON, os.X_OK),
                    reason=f"needs {VLLM_PYTHON} (transformers) from .ci/install")
def test_sglang_bench_serving_gets_the_key_from_the_adapter(server: Emulator,
                                                            tmp_path: Path) -> None:
    from tests.support.sglang_wheel import BENCH_MODULE, bench_tool
    from tests.support.tiny_model import build_command

    tool = bench_tool(tmp_path)
    tokenizer = tmp_path / "tiny"
    subprocess.run(build_command(tokenizer), check=True, capture_output=True, timeout=300)
    env = {"PYTHONPATH": str(tool), "HF_HUB_OFFLINE": "1"}
    metrics = run_bench_serving(server.base_url, SPEC, python=VLLM_PYTHON,
                                module=BENCH_MODULE, tokenizer=str(tokenizer),
                                env=env, api_key=API_KEY)
    assert (metrics.completed, metrics.failed) == (8, 0)
    with pytest.raises(TunerError, match="wrote no result"):  # without the key: 401 from the start
        run_bench_serving(server.base_url, SPEC, python=VLLM_PYTHON,
                          module=BENCH_MODULE, tokenizer=str(tokenizer), env=env)
