"""``tuner bench`` run as a user runs it: a subprocess against a real server on 127.0.0.1."""

from __future__ import annotations

import json

import pytest

from tests.loadgen.conftest import pacing_server  # noqa: F401 (the fixture)
from tests.support.tuner_bench import tuner_bench
from tuner.loadgen import LevelMetrics


def test_json_output_holds_every_level_under_self_explaining_keys(pacing_server) -> None:
    server = pacing_server(ttft_ms=30, itl_ms=2)
    done = tuner_bench(
        server.url,
        "--concurrency",
        "4,16",
        "--num-prompts",
        "32",
        "--input-len",
        "24",
        "--output-len",
        "8",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["url"] == server.url and document["emulated"] is False
    assert [level["concurrency"] for level in document["levels"]] == [4, 16]
    for level in document["levels"]:
        assert level["completed"] == 32 and level["failed"] == 0
        assert level["output_tokens"] == 32 * 8 and level["input_tokens"] == 32 * 24
        assert level["output_throughput"] > 0 and level["median_ttft_ms"] >= 30
        assert {"median_tpot_ms", "p99_itl_ms", "total_throughput", "stop_reason"} <= set(level)
        assert LevelMetrics.from_dict(level).clean()


def test_table_output_and_the_emulated_label(pacing_server) -> None:
    server = pacing_server(ttft_ms=10, itl_ms=1, time_scale=20)
    done = tuner_bench(
        server.url,
        "--concurrency",
        "8",
        "--num-prompts",
        "16",
        "--output-len",
        "4",
        "--api",
        "openai-chat",
    )
    assert done.returncode == 0, done.stderr
    assert "emulated" in done.stdout and "K=20" in done.stdout
    assert "TTFT p50" in done.stdout and "out tok/s" in done.stdout
    row = next(line for line in done.stdout.splitlines() if line.strip("│ ").startswith("8 "))
    assert "16" in row  # all 16 requests done


def test_a_url_that_does_not_answer_is_a_one_line_error(pacing_server) -> None:
    server = pacing_server()
    url = server.url
    server.stop()
    done = tuner_bench(url, "--concurrency", "4", "--json")
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("tuner: error: ")
    assert "does not answer" in done.stderr and url in done.stderr


def test_a_server_answering_errors_fails_but_keeps_what_was_measured(pacing_server) -> None:
    server = pacing_server(ttft_ms=5, itl_ms=1, fail_every=3)
    done = tuner_bench(
        server.url,
        "--concurrency",
        "4,8",
        "--num-prompts",
        "40",
        "--output-len",
        "4",
        "--json",
        "--warmup",
        "0",
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "level 4 stopped: error budget passed" in done.stderr and "HTTP 500" in done.stderr
    document = json.loads(done.stdout)
    assert len(document["levels"]) == 1 and document["error"].startswith("level 4 stopped")
    level = document["levels"][0]
    assert level["failed"] >= 3 and level["completed"] >= 1
    assert level["stop_reason"].startswith("error budget passed")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--concurrency", "64,abc"], "--concurrency"),
        (["--concurrency", "0"], "--concurrency"),
        (["--api", "grpc"], "--api"),
        (["--num-prompts", "0"], "--num-prompts"),
        (["--time-limit", "-1"], "--time-limit"),
        (["--request-rate", "0"], "--request-rate"),
        (["--dataset", "/nonexistent/sharegpt.json"], "--dataset /nonexistent/sharegpt.json"),
    ],
)
def test_an_invalid_option_exits_2_naming_it(args: list[str], message: str) -> None:
    done = tuner_bench("http://127.0.0.1:9", *args)
    assert done.returncode == 2
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"tuner: error: {message}") and "; fix: " in line
