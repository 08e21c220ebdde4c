"""What the client sends: SGLang's and vLLM's bodies byte for byte as written here, a strict server's
with standard OpenAI fields only and text prompts (pure logic, no server)."""

from __future__ import annotations

import json

import pytest

from tuner.engines import load_profile
from tuner.loadgen import Dialect
from tuner.loadgen._apis import ALL_EXTENSIONS, api_format
from tuner.loadgen._prompts import ids_to_words

IDS = [17, 42, 99]


def test_sglang_and_vllm_get_their_bodies_byte_for_byte() -> None:
    completions = ('{"model": "m", "prompt": [17, 42, 99], "max_tokens": 8, "temperature": 0.0, '
                   '"ignore_eos": true, "stream": true, "stream_options": {"include_usage": true, '
                   '"continuous_usage_stats": true}}')
    for api in ("openai", Dialect("openai"), Dialect("openai", "m", frozenset(
            load_profile("vllm").request_extensions))):
        assert json.dumps(api_format(api).request(IDS, 8, "m", True)) == completions
    chat = json.dumps(api_format("openai-chat").request(IDS, 8, "m", False))
    assert chat == ('{"model": "m", "max_tokens": 8, "temperature": 0.0, "ignore_eos": true, '
                    '"stream": false, "messages": [{"role": "user", "content": "'
                    + ids_to_words(IDS) + '"}]}')
    sglang = json.dumps(api_format(Dialect("sglang", None, frozenset())).request(IDS, 8, None, True))
    assert sglang == ('{"input_ids": [17, 42, 99], "sampling_params": {"max_new_tokens": 8, '
                      '"ignore_eos": true, "temperature": 0.0}, "stream": true}')  # its own API
    assert set(load_profile("sglang").request_extensions) == ALL_EXTENSIONS


def test_a_strict_server_gets_standard_fields_and_text_prompts() -> None:
    strict = Dialect("openai", "/tmp/model", frozenset(load_profile("transformers").request_extensions))
    fmt = api_format(strict)
    assert fmt.extensions == frozenset() and fmt.sends_text_for_ids
    assert fmt.request(IDS, 8, "/tmp/model", True) == {
        "model": "/tmp/model", "prompt": ids_to_words(IDS), "max_tokens": 8, "temperature": 0.0,
        "stream": True, "stream_options": {"include_usage": True}}
    assert len(ids_to_words(list(range(128))).split()) == 128  # one word a token asked
    chat = api_format(Dialect("openai-chat", "/tmp/model", frozenset())).request("hi", 4, "x", False)
    assert chat == {"model": "x", "max_tokens": 4, "temperature": 0.0, "stream": False,
                    "messages": [{"role": "user", "content": "hi"}]}


def test_an_unknown_extension_or_api_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown request extensions"):
        Dialect("openai", None, frozenset({"best_of_sglang"}))
    from tuner.errors import ConfigError

    with pytest.raises(ConfigError, match="api 'grpc' is unknown"):
        Dialect("grpc")
