"""``tuner bench`` against the emulated host, as a user runs it: every API answers (the OpenAI
ones with their final usage chunk on the emulator's clock), a run is saved with what produced
it, the percentiles asked for are reported under ``vllm bench serve``'s keys, its option names
are accepted, and a level reports its progress while it runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.emulator import BASE_ARGV, Emulator
from tests.support.tuner_bench import tuner_bench
from tuner import __version__
from tuner.emulator import prepare_host_root
from tuner.loadgen import LevelSpec, run_level, run_levels

SMALL = ("--concurrency", "4", "--num-prompts", "8", "--input-len", "16", "--output-len", "8")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    root = tmp_path_factory.mktemp("host")
    with Emulator(BASE_ARGV, root, env=prepare_host_root(root), time_scale=100.0) as emulator:
        assert emulator.wait_ready(30), emulator.log()
        yield emulator


@pytest.mark.parametrize("api", ["sglang", "openai", "openai-chat"])
def test_every_api_measures_the_emulated_host(server: Emulator, api: str) -> None:
    done = tuner_bench(server.base_url, *SMALL, "--api", api, "--json")
    assert done.returncode == 0, done.stderr
    (level,) = json.loads(done.stdout)["levels"]
    assert (level["completed"], level["failed"], level["stop_reason"]) == (8, 0, None), level["errors"]
    assert level["output_tokens"] == 8 * 8 and level["emulated"]


def test_a_saved_run_records_what_produced_it_under_vllm_bench_serve_names(
    server: Emulator, tmp_path: Path
) -> None:
    saved = tmp_path / "runs" / "glm5.json"  # vllm bench serve's --result-dir and --result-filename
    done = tuner_bench(server.base_url, "--max-concurrency", "2,4", "--num-prompts", "8",
                       "--random-input-len", "16", "--random-output-len", "8", "--backend", "openai",
                       "--num-warmups", "0", "--seed", "7", "--result-dir", str(saved.parent),
                       "--result-filename", saved.name,
                       "--percentile-metrics", "ttft,e2el", "--metric-percentiles", "50,95,99.9")
    assert done.returncode == 0, done.stderr
    document = json.loads(saved.read_text())
    assert document["url"] == server.base_url and document["tuner_version"] == __version__
    assert (document["backend"], document["seed"], document["input_len"], document["output_len"]) == (
        "openai", 7, 16, 8)
    assert document["model_id"] and document["emulated"] is True and len(document["date"]) == 15
    assert [level["max_concurrency"] for level in document["levels"]] == [2, 4]
    for level in document["levels"]:
        assert level["total_token_throughput"] == level["total_throughput"] > 0
        assert (level["num_prompts"], level["total_output_tokens"]) == (8, 64)
        assert level["p50_ttft_ms"] <= level["p95_ttft_ms"] <= level["p99.9_ttft_ms"]
        assert level["p95_e2e_ms"] >= level["p95_ttft_ms"] and "p95_tpot_ms" not in level
        assert level["p95_e2el_ms"] == level["p95_e2e_ms"] and level["median_e2el_ms"] == level["median_e2e_ms"]
    assert "TTFT p95" in done.stdout and "e2e p99.9" in done.stdout and "TPOT" not in done.stdout
    assert f"saved the run to {saved}" in done.stderr


def test_a_level_shows_its_progress_while_it_runs(server: Emulator) -> None:
    seen: list[tuple[int, int, int]] = []
    spec = LevelSpec(concurrency=2, num_requests=16, input_len=16, output_len=32, time_limit_s=120)

    def progress(level: LevelSpec, log: object) -> None:  # log: the level's RequestLog
        seen.append((level.concurrency, log.size - log.status.count(0), sum(log.output_tokens)))

    (metrics,) = run_levels(server.base_url, [spec], on_progress=progress)
    assert metrics.completed == 16
    assert seen and all(level == 2 and size <= 16 for level, size, _ in seen)
    assert [done for _, done, _ in seen] == sorted(done for _, done, _ in seen)  # it only grows
    assert any(0 < done < 16 for _, done, _ in seen), seen  # seen while the level ran


def test_asked_percentiles_agree_with_the_fixed_ones(server: Emulator) -> None:
    spec = LevelSpec(concurrency=4, num_requests=16, input_len=16, output_len=8, time_limit_s=120,
                     percentiles=(90.0, 99.0))
    metrics = asyncio.run(run_level(server.base_url, spec))
    assert metrics.percentiles["p90_ttft_ms"] == pytest.approx(metrics.p90_ttft_ms)
    assert metrics.percentiles["p99_itl_ms"] == pytest.approx(metrics.p99_itl_ms)
    assert "percentiles" in metrics.to_dict()


def test_save_result_names_its_file(server: Emulator, tmp_path: Path) -> None:
    saved = tmp_path / "run.json"
    done = tuner_bench(server.base_url, *SMALL, "--save-result", str(saved), "--no-progress")
    assert done.returncode == 0, done.stderr
    (level,) = json.loads(saved.read_text())["levels"]
    assert level["completed"] == 8 and level["p99_ttft_ms"] > 0
