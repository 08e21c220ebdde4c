"""The HTTP surface of a real emulated server: readiness, information, the three generation APIs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import pytest

from tests.support.emulator import BASE_ARGV, Emulator, get_json, patch_gate, post_json
from tuner.emulator import prepare_host_root
from tuner.emulator.calibration import KV

STREAM_INTERVAL = 4


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Emulator]:
    """One N-on emulated server (gate patched) at K=100, first seen while it starts."""
    root = tmp_path_factory.mktemp("host")
    env = prepare_host_root(root)
    patch_gate(root / "site")
    emulator = Emulator([*BASE_ARGV, "--stream-interval", str(STREAM_INTERVAL)], root, env=env,
                        time_scale=100.0)
    with emulator:
        statuses = set()
        while True:  # /health answers 503 while the start-up runs
            status = get_json(f"{emulator.base_url}/health", timeout=1.0)[0]
            if status in (200, 503):
                statuses.add(status)
            if status == 200 or emulator.returncode is not None:
                break
        emulator.start_statuses = statuses  # type: ignore[attr-defined]
        assert emulator.wait_ready(30), emulator.log()
        yield emulator


def events(raw: bytes) -> list[dict | str]:
    """The ``data:`` payloads of an SSE body (``[DONE]`` kept as a string)."""
    found: list[dict | str] = []
    for line in raw.decode().splitlines():
        if line.startswith("data: "):
            payload = line[6:]
            found.append(payload if payload == "[DONE]" else json.loads(payload))
    return found


def test_health_is_503_while_starting_then_200(server: Emulator) -> None:
    assert server.start_statuses == {503, 200}  # type: ignore[attr-defined]
    assert get_json(f"{server.base_url}/health_generate")[0] == 200
    assert "The server is fired up and ready to roll!" in server.log()


def test_server_info_publishes_the_time_scale_and_says_emulated(server: Emulator) -> None:
    status, info = get_json(f"{server.base_url}/server_info")
    assert status == 200
    assert info["emulator"]["time_scale"] == 100.0 and info["emulator"]["emulated"] is True
    assert info["emulator"]["patched_gate"] is True
    assert info["version"] == "0.5.9" and info["tp_size"] == 8
    assert info["max_total_num_tokens"] == KV.tokens_at_reference
    assert info["moe_runner_backend"] == "flashinfer_cutlass"
    assert info["internal_states"][0]["memory_usage"]["token_capacity"] == KV.tokens_at_reference
    assert get_json(f"{server.base_url}/get_server_info")[1]["version"] == "0.5.9"


def test_model_info_and_models(server: Emulator) -> None:
    _, info = get_json(f"{server.base_url}/model_info")
    assert info["architectures"] == ["GlmMoeDsaForCausalLM"] and info["is_generation"] is True
    _, models = get_json(f"{server.base_url}/v1/models")
    assert models["data"][0]["id"] == "/models/GLM-5-NVFP4"


def test_generate_streams_every_stream_interval_with_cumulative_text(server: Emulator) -> None:
    body = {"input_ids": list(range(100, 356)), "stream": True,
            "sampling_params": {"max_new_tokens": 16, "ignore_eos": True, "temperature": 0}}
    status, raw = post_json(f"{server.base_url}/generate", body)
    assert status == 200
    chunks = events(raw)
    assert chunks[-1] == "[DONE]"
    data = [c for c in chunks if isinstance(c, dict)]
    counts = [c["meta_info"]["completion_tokens"] for c in data]
    assert counts == [1, 4, 8, 12, 16]  # the prefill's first token, then every 4
    assert all(len(c["output_ids"]) == n for c, n in zip(data, counts))
    assert all(b["text"].startswith(a["text"]) for a, b in pairwise(data))
    last = data[-1]["meta_info"]
    assert last["finish_reason"] == {"type": "length", "length": 16}
    assert last["prompt_tokens"] == 256 and last["e2e_latency"] > 0
    assert data[0]["meta_info"]["finish_reason"] is None


def test_completions_stream_with_usage_and_token_id_prompts(server: Emulator) -> None:
    body = {"model": "glm", "prompt": list(range(7, 40)), "max_tokens": 12, "stream": True,
            "temperature": 0, "ignore_eos": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    chunks = events(post_json(f"{server.base_url}/v1/completions", body)[1])
    assert chunks[-1] == "[DONE]"
    data = [c for c in chunks if isinstance(c, dict)]
    assert data[-1]["choices"] == []
    assert data[-1]["usage"] == {"prompt_tokens": 33, "completion_tokens": 12,
                                 "total_tokens": 45}
    texts = [c["choices"][0]["text"] for c in data[:-1]]
    assert data[-2]["choices"][0]["finish_reason"] == "length"
    assert [c["usage"]["completion_tokens"] for c in data[:-1]] == [1, 4, 8, 12]
    plain = json.loads(post_json(f"{server.base_url}/v1/completions",
                                 {**body, "stream": False})[1])
    assert plain["choices"][0]["text"] == "".join(texts)
    assert plain["usage"]["completion_tokens"] == 12


def test_chat_completions_stream_and_reply(server: Emulator) -> None:
    body = {"model": "glm", "messages": [{"role": "user", "content": "Name three colours."}],
            "max_tokens": 8, "temperature": 0, "stream": True}
    chunks = [c for c in events(post_json(f"{server.base_url}/v1/chat/completions", body)[1])
              if isinstance(c, dict)]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    streamed = "".join(c["choices"][0]["delta"]["content"] for c in chunks)
    reply = json.loads(post_json(f"{server.base_url}/v1/chat/completions",
                                 {**body, "stream": False})[1])
    message = reply["choices"][0]["message"]
    assert message["role"] == "assistant" and message["content"] == streamed
    assert reply["usage"]["completion_tokens"] <= 8


def test_greedy_output_depends_on_the_prompt_only(server: Emulator) -> None:
    def text(prompt: list[int], temperature: float = 0.0) -> str:
        body = {"input_ids": prompt, "sampling_params": {
            "max_new_tokens": 24, "ignore_eos": True, "temperature": temperature}}
        return json.loads(post_json(f"{server.base_url}/generate", body)[1])["text"]

    first = text([5, 6, 7, 8])
    assert first == text([5, 6, 7, 8]) and first != text([5, 6, 7, 9])
    assert len(first.split()) == 24 and "!" not in first
    assert text([5, 6, 7, 8], 0.8) != text([5, 6, 7, 8], 0.8)


def test_without_ignore_eos_the_model_may_stop_early(server: Emulator) -> None:
    body = {"text": "Tell me a story about a cat.", "sampling_params": {"max_new_tokens": 4000}}
    reply = json.loads(post_json(f"{server.base_url}/generate", body)[1])
    assert reply["meta_info"]["finish_reason"]["type"] == "stop"
    assert 16 <= reply["meta_info"]["completion_tokens"] < 4000


def test_bad_requests_get_400_with_a_message(server: Emulator) -> None:
    status, raw = post_json(f"{server.base_url}/generate", {"input_ids": "x"})
    assert status == 400 and b"input_ids" in raw
    status, raw = post_json(f"{server.base_url}/v1/completions",
                            {"prompt": "hi", "max_tokens": 0})
    assert status == 400 and b"max_tokens" in raw
    status, raw = post_json(f"{server.base_url}/generate", {
        "input_ids": [1] * 200_000, "sampling_params": {"max_new_tokens": 10_000}})
    assert status == 400 and b"exceeds the maximum" in raw


def test_the_log_shows_prefill_and_decode_batches(server: Emulator) -> None:
    log = server.log()
    assert "Prefill batch, #new-seq: 1, #new-token: 256" in log
    assert "Decode batch, #running-req:" not in log or "gen throughput (token/s)" in log
    assert Path(server.log_path).stat().st_size > 0
