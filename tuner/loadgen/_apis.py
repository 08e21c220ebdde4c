"""The request formats the client speaks: where a request goes, its body, and how to read a reply.

One :class:`ApiFormat` per API: SGLang's native ``/generate``, OpenAI ``/v1/completions`` and
``/v1/chat/completions``. Each reads one streamed event into ``(has_content, server_count,
finished)``: whether the event carries generated text, the server's own cumulative count of
output tokens when the event holds one (``meta_info.completion_tokens`` or ``usage``), and
whether it ends the reply (an OpenAI ``finish_reason``).

A :class:`Dialect` says how one server is spoken to: its API, the model's name in OpenAI requests,
and which of SGLang's and vLLM's extensions of the OpenAI API it takes (``ignore_eos``, token-id
prompts, ``stream_options.continuous_usage_stats``). A strict server takes none: its prompts go as
text (one common word per token id, so their length in tokens is approximate) and its replies may
end before ``max_tokens`` (the stream reader counts them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, cast

from tuner.engines import REQUEST_EXTENSIONS, RequestFormat
from tuner.loadgen._prompts import Prompt, ids_to_words
from tuner.loadgen._spec import check_api

__all__ = ["ALL_EXTENSIONS", "ApiFormat", "Dialect", "RequestFailed", "api_format", "as_dialect"]

# Every extension of the OpenAI API the client knows (SGLang's and vLLM's): the default of a
# dialect; a strict server's dialect takes none of them.
ALL_EXTENSIONS: frozenset[str] = frozenset(REQUEST_EXTENSIONS)


@dataclass(frozen=True)
class Dialect:
    """How the client speaks to one server (picklable: client processes get it too).

    Attributes:
        api: ``sglang``, ``openai`` or ``openai-chat``.
        model: the model's name in OpenAI requests; None: the first of ``GET /v1/models``.
        extensions: the OpenAI extensions the server takes (``ignore_eos``, ``token_ids``,
            ``continuous_usage_stats``; an engine profile's ``request_extensions``); empty: a
            strict OpenAI server. SGLang's native ``/generate`` has them all by definition.
    """

    api: RequestFormat = "sglang"
    model: str | None = None
    extensions: frozenset[str] = field(default=ALL_EXTENSIONS)

    def __post_init__(self) -> None:
        check_api(self.api)
        unknown = set(self.extensions) - ALL_EXTENSIONS
        if unknown:
            raise ValueError(
                f"unknown request extensions {sorted(unknown)}: use {sorted(ALL_EXTENSIONS)}"
            )
        object.__setattr__(self, "extensions", frozenset(self.extensions))


def as_dialect(api: str | Dialect) -> Dialect:
    """``api`` as a :class:`Dialect`: an API's name is that API with every extension the
    client knows."""
    if isinstance(api, Dialect):
        return api
    return Dialect(cast(RequestFormat, api))


class RequestFailed(Exception):
    """One request failed: the server answered an error, or its stream was inconsistent."""


@dataclass(frozen=True)
class ApiFormat:
    """How one API is spoken.

    Attributes:
        name: ``sglang``, ``openai`` or ``openai-chat``.
        path: the endpoint, joined to the server's base URL.
        needs_model: the body names the served model (read from ``/v1/models``).
        body: ``(prompt, max_tokens, model, stream, extensions) -> dict`` a greedy request (that
            ignores EOS where ``extensions`` allow it).
        read_event: ``(event) -> (has_content, server_count | None, finished)`` for a streamed
            event.
        read_text: ``(reply) -> str`` the generated text of a non-streamed reply.
        extensions: the OpenAI extensions the server takes (:class:`Dialect`).
    """

    name: str
    path: str
    needs_model: bool
    body: Callable[[Prompt, int, str | None, bool, frozenset[str]], dict[str, Any]]
    read_event: Callable[[dict[str, Any]], tuple[bool, int | None, bool]]
    read_text: Callable[[dict[str, Any]], str]
    extensions: frozenset[str] = ALL_EXTENSIONS

    def request(
        self, prompt: Prompt, max_tokens: int, model: str | None, stream: bool
    ) -> dict[str, Any]:
        """The body of one greedy request, with the extensions this server takes."""
        return self.body(prompt, max_tokens, model, stream, self.extensions)

    @property
    def sends_text_for_ids(self) -> bool:
        """Token-id prompts go as words (the server takes no ids): their lengths are estimates."""
        return self.name != "sglang" and "token_ids" not in self.extensions


def _error_text(event: dict[str, Any]) -> str:
    error = event.get("error", event)
    if isinstance(error, dict):
        error = error.get("message") or error
    return f"server error in stream: {str(error)[:200]}"


def _sglang_body(
    prompt: Prompt,
    max_tokens: int,
    model: str | None,
    stream: bool,
    extensions: frozenset[str] = ALL_EXTENSIONS,
) -> dict:
    body: dict[str, Any] = {"text": prompt} if isinstance(prompt, str) else {"input_ids": prompt}
    body["sampling_params"] = {
        "max_new_tokens": max_tokens,
        "ignore_eos": True,
        "temperature": 0.0,
    }
    body["stream"] = stream
    return body


def _sglang_event(event: dict[str, Any]) -> tuple[bool, int | None, bool]:
    meta = event.get("meta_info")
    if meta is None:
        raise RequestFailed(_error_text(event))
    return True, meta["completion_tokens"], False  # its stream always ends with [DONE]


def _sglang_text(reply: dict[str, Any]) -> str:
    if isinstance(reply, list):  # a batch of one
        reply = reply[0]
    return str(reply["text"])


def _openai_body(
    prompt: Prompt,
    max_tokens: int,
    model: str | None,
    stream: bool,
    extensions: frozenset[str] = ALL_EXTENSIONS,
) -> dict:
    if not isinstance(prompt, str) and "token_ids" not in extensions:
        prompt = ids_to_words(prompt)
    body: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
    }
    if "ignore_eos" in extensions:
        body["ignore_eos"] = True
    body["stream"] = stream
    if stream:
        body["stream_options"] = {"include_usage": True}
        if "continuous_usage_stats" in extensions:
            body["stream_options"]["continuous_usage_stats"] = True
    return body


def _chat_body(
    prompt: Prompt,
    max_tokens: int,
    model: str | None,
    stream: bool,
    extensions: frozenset[str] = ALL_EXTENSIONS,
) -> dict:
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], dict):  # a dataset's chat
        messages = prompt
    else:
        text = prompt if isinstance(prompt, str) else ids_to_words(prompt)
        messages = [{"role": "user", "content": text}]
    body = _openai_body("", max_tokens, model, stream, extensions)
    del body["prompt"]
    body["messages"] = messages
    return body


def _usage_count(event: dict[str, Any]) -> int | None:
    usage = event.get("usage")
    return usage.get("completion_tokens") if usage else None


def _openai_event(event: dict[str, Any]) -> tuple[bool, int | None, bool]:
    choices = event.get("choices")
    if choices:
        choice = choices[0]
        finished = choice.get("finish_reason") is not None
        return bool(choice.get("text")), _usage_count(event), finished
    if "usage" not in event:
        raise RequestFailed(_error_text(event))
    return False, _usage_count(event), False


def _chat_event(event: dict[str, Any]) -> tuple[bool, int | None, bool]:
    choices = event.get("choices")
    if choices:
        choice = choices[0]
        delta = choice.get("delta") or {}
        finished = choice.get("finish_reason") is not None
        return bool(delta.get("content")), _usage_count(event), finished
    if "usage" not in event:
        raise RequestFailed(_error_text(event))
    return False, _usage_count(event), False


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


def api_format(api: str | Dialect) -> ApiFormat:
    """The :class:`ApiFormat` of an API's name (every extension), or of a :class:`Dialect` (its
    extensions); an unknown name is a ``ConfigError``."""
    if isinstance(api, Dialect):
        return replace(_FORMATS[api.api], extensions=api.extensions)
    return _FORMATS[check_api(api)]
