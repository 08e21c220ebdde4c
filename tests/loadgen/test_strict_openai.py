"""A strict OpenAI-compatible server (``transformers serve``'s manners) measured by ``tuner bench``
and by the study loop's client: the model named by the user, no SGLang/vLLM extensions, a stream
without ``[DONE]``, replies that end early counted and never taken as full.

The server is real (aiohttp on 127.0.0.1, tests/support/strict_openai_server.py): it answers 422
to an unknown field, 400 to a token-id prompt, 500 or an empty list to ``GET /v1/models``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.tuner_bench import tuner_bench
from tests.support.strict_openai_server import StrictServer
from tuner.loadgen import Dialect, LevelSpec, complete, run_level
from tuner.space import load_space
from tuner.study.trial import request_dialect

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests/fixtures/transformers"
MODEL = "/models/qwen3-moe-random"


@pytest.fixture
def strict() -> Iterator[StrictServer]:
    """The strict server, every fifth request ending after 3 tokens (finish_reason "stop")."""
    with StrictServer(MODEL, stop_early_every=5, stop_after=3) as server:
        yield server


def _measured(server: StrictServer) -> list[dict]:
    return [r for r in server.stats()["records"] if r["status"] == 200]


@pytest.mark.parametrize("models", ["error", "empty"])
def test_bench_asks_for_the_model_name_when_the_server_lists_none(models: str) -> None:
    with StrictServer(MODEL, models=models) as server:
        done = tuner_bench(server.url, "--api", "openai", "--strict", "--concurrency", "2",
                           "--num-prompts", "4", "--output-len", "4")
        assert server.stats()["records"] == []  # not one request sent without a name
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tuner: error: ")
    what = "500 without data[0].id" if models == "error" else "an empty model list"
    assert f"/v1/models answered {what}" in lines[0]
    assert "tuner bench --model NAME" in lines[0] and "workload.model" in lines[0]


def test_bench_strict_measures_every_token_and_counts_the_short_replies(strict) -> None:
    done = tuner_bench(strict.url, "--api", "openai", "--strict", "--model", MODEL,
                       "--concurrency", "4,8", "--num-prompts", "20", "--input-len", "24",
                       "--output-len", "8", "--warmup", "0", "--json")
    assert done.returncode == 0, done.stderr
    levels = json.loads(done.stdout)["levels"]
    records = strict.stats()["records"]
    # What was sent: standard fields only, the model named, the prompt as text of 24 words.
    assert [r["status"] for r in records] == [200] * 40
    assert {tuple(r["keys"]) for r in records} == {
        ("max_tokens", "model", "prompt", "stream", "stream_options", "temperature")}
    assert {json.dumps(r["stream_options"]) for r in records} == {'{"include_usage": true}'}
    assert {r["model"] for r in records} == {MODEL} and {r["prompt_words"] for r in records} == {24}
    # What was measured: every request complete without [DONE]; the early ones as they came.
    for level, sent in zip(levels, (records[:20], records[20:])):
        short = sum(r["finish_reason"] == "stop" for r in sent)
        assert short == 4  # every fifth request
        assert level["completed"] == 20 and level["failed"] == 0 and level["stop_reason"] is None
        assert level["short_replies"] == short
        assert level["output_tokens"] == sum(r["tokens"] for r in sent) == 16 * 8 + 4 * 3
        assert level["input_tokens"] == 20 * 24 and not level["input_tokens_estimated"]


def test_bench_without_strict_sends_the_extensions_and_says_what_the_server_refused(strict) -> None:
    done = tuner_bench(strict.url, "--api", "openai", "--model", MODEL, "--concurrency", "2",
                       "--num-prompts", "4", "--output-len", "4", "--warmup", "0", "--json")
    assert done.returncode == 1
    level = json.loads(done.stdout)["levels"][0]
    assert level["completed"] == 0
    assert "HTTP 422" in level["stop_reason"] and "ignore_eos" in level["stop_reason"]
    keys = set(strict.stats()["records"][0]["keys"])
    assert {"ignore_eos", "prompt"} <= keys  # as SGLang and vLLM take it: unchanged


def test_the_study_client_speaks_the_profile_dialect_with_client_processes(
        strict, monkeypatch) -> None:
    monkeypatch.setenv("TUNER_MODEL_DIR", MODEL)
    space = load_space(REPO / "search_spaces/transformers-h200.yaml")
    dialect = request_dialect(space, space.workload_for(False).api or "")
    assert dialect == Dialect("openai", MODEL, frozenset())
    spec = LevelSpec(concurrency=6, num_requests=30, input_len=16, output_len=6,
                     time_limit_s=60, warmup=2)
    for workers in (1, 2):  # the Dialect crosses into client processes too
        metrics = asyncio.run(run_level(strict.url, spec, api=dialect, client_workers=workers))
        assert metrics.completed == 30 and metrics.failed == 0, metrics.errors
        assert metrics.stop_reason is None and metrics.short_replies > 0
        measured = _measured(strict)[-30:]
        assert metrics.output_tokens == sum(r["tokens"] for r in measured)
        assert metrics.short_replies == sum(r["finish_reason"] == "stop" for r in measured)
    assert all("ignore_eos" not in r["keys"] for r in strict.stats()["records"])
    # The probe's non-streamed completion, with the chat API too.
    for api in ("openai", "openai-chat"):
        text = complete(strict.url, Dialect(api, MODEL, frozenset()), "w5 w6 w7 w8", 4)
        assert len(text.split()) in (3, 4) and text.split()[0].startswith("w")


def test_a_stream_cut_before_its_finish_reason_is_a_failed_request(tmp_path: Path) -> None:
    """transformers serve's own stream (no [DONE]) is complete; cut before its last event, not."""
    real = FIXTURES / "stream-cb.txt"
    cut = tmp_path / "cut.txt"
    cut.write_bytes(real.read_bytes()[: real.read_bytes().rindex(b"data: ")])  # no finish_reason
    spec = LevelSpec(concurrency=1, num_requests=2, input_len=4, output_len=6, time_limit_s=30)
    dialect = Dialect("openai", "/tmp/model", frozenset())
    with StrictServer("/tmp/model", replay=real) as whole, \
            StrictServer("/tmp/model", replay=cut) as broken:
        good = asyncio.run(run_level(whole.url, spec, api=dialect))
        bad = asyncio.run(run_level(broken.url, spec, api=dialect))
    assert good.completed == 2 and good.output_tokens == 12 and good.short_replies == 0
    assert good.input_tokens == 8  # the server's usage.prompt_tokens
    assert bad.completed == 0
    assert "stream ended before [DONE] or a finish_reason" in bad.stop_reason


def test_the_real_chat_stream_that_echoes_its_prompt_is_not_counted_as_tokens() -> None:
    """transformers serve 5.17 with make_model.py's one-line chat template streams the prompt
    ("w5 w6") as the first content chunk, then the 6 tokens its usage counts: 7 text events for
    6 tokens, so its first "token" time would be the echo's. The client refuses such a stream
    rather than time it; search_spaces/transformers-h200.yaml measures /v1/completions."""
    spec = LevelSpec(concurrency=1, num_requests=2, input_len=4, output_len=6, time_limit_s=30)
    with StrictServer("/tmp/model", replay=FIXTURES / "chatstream-cb.txt") as server:
        level = asyncio.run(run_level(server.url, spec,
                                      api=Dialect("openai-chat", "/tmp/model", frozenset())))
    assert level.completed == 0
    assert "server counted 6 output tokens but streamed 7 events of text" in level.stop_reason
