"""Fresh prompts at every level, on a real engine: vLLM on this machine's CPU with prefix caching
on (its default), the tiny random-weight Llama, one server start for the module.

vLLM counts the prompt tokens it looked up in its prefix cache and those it found there
(``vllm:prefix_cache_queries_total`` / ``vllm:prefix_cache_hits_total`` on ``/metrics``); each
level reads both before and after itself.

- A level sent again (its prompts drawn from the same seed) finds its prompts in the cache and
  reads a lower TTFT than the same level fresh.
- The goodput search's own levels (:func:`tuner.study.goodput.measure_goodput`, the real client)
  find nothing there: each level's prompts are new to the server.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from tests.real_engine.conftest import VLLM_PYTHON
from tests.support.sshd import free_port
from tests.support.space import GLM5
from tests.support.trial_session import SearchSession
from tuner.errors import ServerFailure
from tuner.loadgen import LevelMetrics, LevelSpec, run_level
from tuner.space import load_space
from tuner.study.trial import measure_goodput, rate_level
from tuner.timescale import TimeScale

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]

# Long prompts and 2 output tokens: TTFT is mostly prefill, which the cache skips.
INPUT_LEN, OUTPUT_LEN = 1536, 2
WORKLOAD = {"input_len": INPUT_LEN, "output_len": OUTPUT_LEN, "warmup": 2, "max_concurrency": 4,
            "requests_per_level": {"per_concurrency": 1, "min": 8}, "rate_level_s": 6,
            "api": "openai"}


@dataclass
class _Vllm:
    url: str
    log: Path

    def cache(self) -> tuple[float, float]:
        """Prompt tokens looked up in the prefix cache so far, and those found there."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        totals = {"vllm:prefix_cache_queries_total": 0.0, "vllm:prefix_cache_hits_total": 0.0}
        for line in text.splitlines():
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in totals:
                totals[name] += float(line.rsplit(" ", 1)[1])
        return totals["vllm:prefix_cache_queries_total"], totals["vllm:prefix_cache_hits_total"]

    def level(self, spec: LevelSpec) -> tuple[LevelMetrics, float]:
        """Run one level with the real client; its metrics and the share of its prompt tokens
        (warm-up included) that vLLM served from its prefix cache."""
        queries, hits = self.cache()
        metrics = asyncio.run(run_level(self.url, spec, api="openai", time_scale=TimeScale()))
        after_queries, after_hits = self.cache()
        assert metrics.completed == spec.num_requests, (metrics.stop_reason, metrics.errors)
        return metrics, (after_hits - hits) / max(1.0, after_queries - queries)


@pytest.fixture(scope="module")
def vllm(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Vllm]:
    """vLLM serving the tiny model on 127.0.0.1, prefix caching on; stopped by process group."""
    folder = tmp_path_factory.mktemp("vllm-fresh")
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_HOST_IP": "127.0.0.1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
           "VLLM_CACHE_ROOT": str(folder / "cache"), "PYTHONUNBUFFERED": "1"}
    log = folder / "vllm.log"
    with log.open("w") as out:
        # Below the client (nice 5), as the study runs it: a busy server must not delay the
        # client's sends.
        server = subprocess.Popen(
            ["nice", "-n", "5", str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server",
             "--model", str(tiny_model), "--host", "127.0.0.1", "--port", str(port),
             "--enforce-eager", "--enable-prefix-caching", "--max-num-seqs", "4",
             "--disable-uvicorn-access-log"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 600
        while True:
            assert server.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "vLLM did not answer /health within 600 s"
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(1.0)
        yield _Vllm(url, log)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=30)


def _workload(tmp_path: Path) -> Any:
    document = yaml.safe_load(GLM5.read_text())
    document["workload"].update(WORKLOAD)
    document["objective"] = {"metric": "goodput", "slo": {"p99_ttft_ms": 60000},
                             "goodput": {"start_rate": 1, "max_levels": 3}}
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return load_space(path)


def test_a_level_sent_again_is_served_from_the_cache_and_reads_a_lower_ttft(vllm: _Vllm, tmp_path: Path) -> None:
    workload = _workload(tmp_path).workload_for(False)
    fresh = rate_level(workload, 1.0, 120, 3, None)
    first, first_hits = vllm.level(fresh)
    again, again_hits = vllm.level(fresh)  # the same prompts: a rate level of a trial before
    after = rate_level(workload, 1.0, 120, 3, None, first_request=fresh.num_requests)
    new, new_hits = vllm.level(after)  # the trial's next level now: its own prompts
    median = {name: m.median_ttft_ms for name, m in (("fresh", first), ("again", again), ("new", new))}
    print(f"median TTFT ms {median}; share of prompt tokens from the cache: fresh {first_hits:.0%}, "
          f"sent again {again_hits:.0%}, the next level now {new_hits:.0%}")
    assert again_hits > 0.8 and first_hits < 0.05 and new_hits < 0.05
    assert median["again"] < 0.8 * min(median["fresh"], median["new"]), median


def test_the_goodput_search_s_levels_find_nothing_in_the_cache(vllm: _Vllm, tmp_path: Path) -> None:
    """Each rate level draws its own prompts: levels drawn from one seed each begin with the
    prompts of the level before, and read up to 92% of their prompt tokens from the cache (11 of a
    1,536-token prompt's 12 blocks), a TTFT no fresh traffic gets."""
    space = _workload(tmp_path)

    class Runner:
        requests = None
        study = optuna.create_study(direction="maximize")
        target = type("Target", (), {"time_scale": TimeScale(), "profile": None})()
        shares: list[float] = []

        def __init__(self) -> None:
            self.space = space
            self.on_phase = lambda text: None
            self.on_level = lambda metrics, k, n: None

        def _run_level(self, session, spec, workers=None):  # noqa: ANN001, ANN202
            metrics, share = vllm.level(spec)
            self.shares.append(share)
            return metrics, None

    runner = Runner()
    try:
        measure_goodput(runner, runner.study.ask(), SearchSession(), space.workload_for(False))
    except (ServerFailure, optuna.TrialPruned):  # how the levels were judged is not the point
        pass
    print(f"share of prompt tokens from the cache, per level: {[f'{s:.0%}' for s in runner.shares]}")
    assert len(runner.shares) >= 2 and max(runner.shares) < 0.05, runner.shares
    assert statistics.fmean(runner.shares) < 0.05
