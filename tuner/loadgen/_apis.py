"""The request formats the client speaks: where a request goes, its body, and how to read a reply.

One :class:`ApiFormat` per API: SGLang's native ``/generate``, OpenAI ``/v1/completions`` and
``/v1/chat/completions``. Each reads one streamed event into ``(has_content, server_count)``:
whether the event carries generated text, and the server's own cumulative count of output
tokens when the event holds one (``meta_info.completion_tokens`` or ``usage``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tuner.loadgen._prompts import Prompt, ids_to_words
from tuner.loadgen._spec import check_api

__all__ = ["ApiFormat", "RequestFailed", "api_format"]


class RequestFailed(Exception):
    """One request failed: the server answered an error, or its stream was inconsistent."""


@dataclass(frozen=True)
class ApiFormat:
    """How one API is spoken.

    Attributes:
        name: ``sglang``, ``openai`` or ``openai-chat``.
        path: the endpoint, joined to the server's base URL.
        needs_model: the body names the served model (read from ``/v1/models``).
        body: ``(prompt, max_tokens, model, stream) -> dict`` a greedy request that ignores EOS.
        read_event: ``(event) -> (has_content, server_count | None)`` for a streamed event.
        read_text: ``(reply) -> str`` the generated text of a non-streamed reply.
    """

    name: str
    path: str
    needs_model: bool
    body: Callable[[Prompt, int, str | None, bool], dict[str, Any]]
    read_event: Callable[[dict[str, Any]], tuple[bool, int | None]]
    read_text: Callable[[dict[str, Any]], str]


def _error_text(event: dict[str, Any]) -> str:
    error = event.get("error", event)
    if isinstance(error, dict):
        error = error.get("message") or error
    return f"server error in stream: {str(error)[:200]}"


def _sglang_body(prompt: Prompt, max_tokens: int, model: str | None, stream: bool) -> dict:
    body: dict[str, Any] = {"text": prompt} if isinstance(prompt, str) else {"input_ids": prompt}
    body["sampling_params"] = {
        "max_new_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
    }
    body["stream"] = stream
    return body


def _sglang_event(event: dict[str, Any]) -> tuple[bool, int | None]:
    meta = event.get("meta_info")
    if meta is None:
        raise RequestFailed(_error_text(event))
    return True, meta["completion_tokens"]


def _sglang_text(reply: dict[str, Any]) -> str:
    if isinstance(reply, list):  # a batch of one
        reply = reply[0]
    return str(reply["text"])


def _openai_body(prompt: Prompt, max_tokens: int, model: str | None, stream: bool) -> dict:
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
    return body


def _chat_body(prompt: Prompt, max_tokens: int, model: str | None, stream: bool) -> dict:
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], dict):  # a dataset's chat
        messages = prompt
    else:
        text = prompt if isinstance(prompt, str) else ids_to_words(prompt)  # type: ignore[arg-type]
        messages = [{"role": "user", "content": text}]
    body = _openai_body("", max_tokens, model, stream)
    del body["prompt"]
    body["messages"] = messages
    return body


def _usage_count(event: dict[str, Any]) -> int | None:
    usage = event.get("usage")
    return usage.get("completion_tokens") if usage else None


def _openai_event(event: dict[str, Any]) -> tuple[bool, int | None]:
    choices = event.get("choices")
    if choices:
        return bool(choices[0].get("text")), _usage_count(event)
    if "usage" not in event:
        raise RequestFailed(_error_text(event))
    return False, _usage_count(event)


def _chat_event(event: dict[str, Any]) -> tuple[bool, int | None]:
    choices = event.get("choices")
    if choices:
        delta = choices[0].get("delta") or {}
        return bool(delta.get("content")), _usage_count(event)
    if "usage" not in event:
        raise RequestFailed(_error_text(event))
    return False, _usage_count(event)


def _openai_text(reply: dict[str, Any]) -> str:
    return str(reply["choices"][0]["text"])


def _chat_text(reply: dict[str, Any]) -> str:
    return str(reply["choices"][0]["message"]["content"] or "")


_FORMATS = {
    "sglang": ApiFormat("sglang", "/generate", False, _sglang_body, _sglang_event, _sglang_text),
    "openai": ApiFormat(
        "openai", "/v1/completions", True, _openai_body, _openai_event, _openai_text
    ),
    "openai-chat": ApiFormat(
        "openai-chat", "/v1/chat/completions", True, _chat_body, _chat_event, _chat_text
    ),
}


def api_format(api: str) -> ApiFormat:
    """The :class:`ApiFormat` named ``api``; an unknown name is a ``ConfigError``."""
    return _FORMATS[check_api(api)]
