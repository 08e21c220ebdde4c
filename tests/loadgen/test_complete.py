"""Greedy one-shot completions (the correctness probe's tool) against a real server."""

from __future__ import annotations

import pytest

from tuner.errors import NoAnswerInTime, TunerError
from tuner.loadgen import complete, complete_many


@pytest.mark.parametrize("api", ["sglang", "openai", "openai-chat"])
def test_complete_returns_the_generated_text(pacing_server, api: str) -> None:
    server = pacing_server(ttft_ms=5, itl_ms=0)
    text = complete(server.url, api, [20, 30, 40], max_tokens=6, timeout_s=10)
    assert len(text.split()) == 6
    assert complete(server.url, api, [20, 30, 40], max_tokens=6, timeout_s=10) == text


def test_complete_many_keeps_the_order_of_the_prompts(pacing_server) -> None:
    server = pacing_server(ttft_ms=5, itl_ms=0)
    prompts: list[list[int] | str] = [[1, 2], [50], "some words here", [7, 7, 7, 7]]
    texts = complete_many(server.url, "openai", prompts, max_tokens=3, timeout_s=10)
    assert texts == [complete(server.url, "openai", p, 3, 10) for p in prompts]
    assert len(set(texts)) > 1


def test_server_errors_and_silence_are_one_line_tuner_errors(pacing_server) -> None:
    failing = pacing_server(ttft_ms=5, itl_ms=0, fail_every=1)
    with pytest.raises(TunerError, match="HTTP 500: .*injected failure") as caught:
        complete(failing.url, "sglang", [1, 2, 3], 4, 10)
    assert "\n" not in str(caught.value)
    url = failing.url
    failing.stop()
    with pytest.raises(TunerError, match="does not answer.*Connection refused") as refused:
        complete(url, "sglang", [1, 2, 3], 4, 10)
    assert not isinstance(refused.value, NoAnswerInTime)


def test_a_slow_server_is_bounded_by_the_timeout(pacing_server) -> None:
    """Silence is told apart from a refusal: the probe records it as a hang, not wrong output."""
    server = pacing_server(ttft_ms=5000, itl_ms=0)
    with pytest.raises(NoAnswerInTime, match="does not answer"):
        complete(server.url, "sglang", [1, 2, 3], 4, timeout_s=0.5)
