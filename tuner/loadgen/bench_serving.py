"""The ``sglang.bench_serving`` adapter: run SGLang's own benchmark for a level, read its output.

For users who trust SGLang's tool more than this client: :func:`bench_serving_command` builds
the shell command for one :class:`LevelSpec` (random token ids of fixed length, closed loop at
the level's concurrency), to run on the host; :func:`parse_bench_serving_output` reads the file
it appends to into the same :class:`LevelMetrics` the client produces. :func:`run_bench_serving`
does both on this machine.

A server started with ``--api-key`` is reached with the key in the tool's environment, never on
its command line: SGLang 0.5.9's ``bench_serving.get_auth_headers`` sends ``OPENAI_API_KEY`` as
``Authorization: Bearer KEY`` on every request (:func:`bench_serving_env`).

The tool moved from ``sglang.bench_serving`` to ``sglang.benchmark.serving`` in 0.5.21 (the
old name still works but warns). Its output file is opened in append mode: the run's result is
the last JSON line, which may hold ``Infinity`` (``request_rate``); total tokens/s is the key
``total_throughput``.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tuner.errors import TunerError
from tuner.loadgen._metrics import LevelMetrics
from tuner.loadgen._spec import LevelSpec
from tuner.timescale import TimeScale

__all__ = [
    "API_KEY_VARIABLE",
    "bench_module_for",
    "bench_serving_command",
    "bench_serving_env",
    "parse_bench_serving_output",
    "run_bench_serving",
]

NEW_MODULE_SINCE = (0, 5, 21)
# The variable bench_serving reads the server's key from (sent as ``Authorization: Bearer``).
API_KEY_VARIABLE = "OPENAI_API_KEY"


def bench_serving_env(api_key: str | None) -> dict[str, str]:
    """The environment that makes bench_serving send ``api_key`` (empty without a key)."""
    return {API_KEY_VARIABLE: api_key} if api_key else {}


def bench_module_for(version: str | None) -> str:
    """The module to run for an installed sglang ``version`` (None or unreadable: the old)."""
    numbers = tuple(int(part) for part in re.findall(r"\d+", version or "")[:3])
    if numbers and numbers >= NEW_MODULE_SINCE:
        return "sglang.benchmark.serving"
    return "sglang.bench_serving"


def bench_serving_command(
    base_url: str,
    spec: LevelSpec,
    output_file: str,
    *,
    python: str = "python3",
    module: str = "sglang.bench_serving",
    backend: str = "sglang",
    tokenizer: str | None = None,
    model: str | None = None,
) -> str:
    """The shell command (every value quoted) that runs bench_serving for ``spec``.

    Args:
        base_url: the server, e.g. ``http://127.0.0.1:30000``.
        spec: the level: lengths, prompts, concurrency, rate, warm-up and seed are passed on.
        output_file: the JSON-lines file the tool appends its result to.
        python: the host's Python that has sglang installed.
        module: ``sglang.bench_serving`` or ``sglang.benchmark.serving``
            (see :func:`bench_module_for`).
        backend: bench_serving's ``--backend`` (``sglang``, ``vllm``, ``sglang-oai``, ...).
        tokenizer: a local tokenizer path (the tool loads one to size random token ids).
        model: the served model name, when the tool should not ask ``/v1/models``.
    """
    argv = [
        python,
        "-m",
        module,
        "--backend",
        backend,
        "--base-url",
        base_url.rstrip("/"),
        "--dataset-name",
        "random-ids",
        "--random-input-len",
        str(spec.input_len),
        "--random-output-len",
        str(spec.output_len),
        "--random-range-ratio",
        "1.0",
        "--num-prompts",
        str(spec.num_requests),
        "--max-concurrency",
        str(spec.concurrency),
        "--warmup-requests",
        str(spec.warmup),
        "--seed",
        str(spec.seed),
        "--output-file",
        output_file,
        "--output-details",
        "--disable-tqdm",
    ]
    if spec.request_rate is not None:
        argv += ["--request-rate", repr(float(spec.request_rate))]
    if tokenizer is not None:
        argv += ["--tokenizer", tokenizer]
    if model is not None:
        argv += ["--model", model]
    return " ".join(shlex.quote(part) for part in argv)


def _last_result(text: str) -> dict[str, Any]:
    for line in reversed(text.splitlines()):
        if line.strip():
            try:
                document = json.loads(line)  # Python's json reads Infinity and NaN
            except json.JSONDecodeError as exc:
                raise TunerError(f"bench_serving output: last line is not JSON ({exc})") from None
            if isinstance(document, dict):
                return document
            break
    raise TunerError("bench_serving output holds no result line: did the benchmark fail?")


def _ms(document: dict[str, Any], key: str, scale: TimeScale) -> float | None:
    value = document.get(key)
    if value is None:
        return None
    number = float(value)
    return scale.duration(number) if math.isfinite(number) else None


def parse_bench_serving_output(
    text: str, *, num_requests: int | None = None, time_scale: TimeScale | None = None
) -> LevelMetrics:
    """Read the last result of a bench_serving output file into :class:`LevelMetrics`.

    Args:
        text: the whole output file (JSON lines, the last one is the run's).
        num_requests: the prompts sent (``--num-prompts``), to count failures when the file
            has no per-request ``errors`` (written with ``--output-details``).
        time_scale: the server's time scale, for a run against the emulator.
    """
    result = _last_result(text)
    scale = time_scale or TimeScale()
    completed = int(result["completed"])
    errors = [e for e in result.get("errors") or [] if e]
    if "errors" in result:
        failed = len(errors)
        sent = len(result["errors"])
    else:
        sent = num_requests if num_requests is not None else completed
        failed = max(sent - completed, 0)
    latencies: dict[
        str, Any
    ] = {}  # the LevelMetrics fields *_ttft_ms, *_tpot_ms, ... (float or None)
    for ours, theirs in (
        ("ttft", "ttft"),
        ("tpot", "tpot"),
        ("itl", "itl"),
        ("e2e", "e2e_latency"),
    ):
        for stat in ("mean", "median", "p90", "p99"):
            latencies[f"{stat}_{ours}_ms"] = _ms(result, f"{stat}_{theirs}_ms", scale)
    concurrency = result.get("max_concurrency") or result.get("concurrency") or 0
    return LevelMetrics(
        concurrency=int(concurrency),
        num_requests=sent,
        completed=completed,
        failed=failed,
        duration_s=scale.duration(float(result["duration"])),
        input_tokens=int(result["total_input_tokens"]),
        output_tokens=int(result["total_output_tokens"]),
        output_throughput=scale.rate(float(result["output_throughput"])),
        total_throughput=scale.rate(float(result["total_throughput"])),
        request_throughput=scale.rate(float(result["request_throughput"])),
        max_output_tokens_per_s=scale.rate(float(result.get("max_output_tokens_per_s") or 0)),
        emulated=scale.emulated,
        time_scale=scale.factor,
        errors=tuple(dict.fromkeys(str(e)[:240] for e in errors))[:5],
        **latencies,
    )


def run_bench_serving(
    base_url: str,
    spec: LevelSpec,
    *,
    env: dict[str, str] | None = None,
    time_scale: TimeScale | None = None,
    api_key: str | None = None,
    **tool: Any,
) -> LevelMetrics:
    """Run bench_serving on this machine for ``spec`` and read its result.

    ``tool``: how the tool is started, as :func:`bench_serving_command` takes it (``python``,
    ``module``, ``backend``, ``tokenizer``, ``model``). ``api_key``: the server's ``--api-key``,
    given to the tool in its environment (:func:`bench_serving_env`).

    The tool runs in its own process group and is killed if it outlives the level's time
    limit (plus a minute for its start-up).

    Raises:
        TunerError: the tool failed, timed out, or wrote no result.
    """
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as workdir:
        output = str(Path(workdir) / "result.jsonl")
        command = bench_serving_command(base_url, spec, output, **tool)
        process = subprocess.Popen(
            command,
            shell=True,
            cwd=workdir,
            start_new_session=True,
            env={**os.environ, **(env or {}), **bench_serving_env(api_key)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            log, _ = process.communicate(timeout=spec.time_limit_s + 60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise TunerError(f"bench_serving ran past {spec.time_limit_s + 60:g} s and was killed")
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if not Path(output).is_file():
            tail = " | ".join(log.strip().splitlines()[-3:])
            raise TunerError(f"bench_serving wrote no result (exit {process.returncode}): {tail}")
        return parse_bench_serving_output(
            Path(output).read_text(), num_requests=spec.num_requests, time_scale=time_scale
        )
