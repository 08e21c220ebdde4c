"""The request and response formats the emulated server speaks (SGLang native and OpenAI).

:func:`parse_request` turns the JSON body of ``/generate``, ``/v1/completions`` or
``/v1/chat/completions`` into a :class:`GenerationRequest`; the ``*_event`` functions build the
streamed chunks and the ``*_reply`` functions the non-streamed answers, in the shapes of
``sglang.md`` §3-4 and of the OpenAI API (``stream_options.include_usage`` adds a final usage
chunk, ``continuous_usage_stats`` a usage in every chunk).
"""

from __future__ import annotations

import json
import time
from array import array
from dataclasses import dataclass
from typing import Any

from tuner.emulator.outputs import Completion, text_to_ids

__all__ = [
    "GenerationRequest",
    "RequestError",
    "StreamCursor",
    "event",
    "parse_request",
    "reply",
    "usage_chunk",
]

SGLANG_DEFAULT_MAX_NEW = 128
OPENAI_DEFAULT_MAX_TOKENS = 16


class RequestError(ValueError):
    """A request the server answers with HTTP 400."""


@dataclass(frozen=True)
class GenerationRequest:
    """One generation request, whatever API it came through."""

    api: str  # generate | completions | chat
    prompt_ids: list[int]
    max_new_tokens: int
    ignore_eos: bool
    temperature: float
    stream: bool
    include_usage: bool = False
    continuous_usage: bool = False
    incremental: bool = False  # SGLang --stream-output: disjoint segments
    rid: str = ""


def _prompt_ids(prompt: Any, field: str) -> list[int]:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (list, str)):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        return text_to_ids(prompt)
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], bool):
        try:
            array("q", prompt)  # raises TypeError unless every element is an integer
        except (TypeError, OverflowError):
            pass
        else:
            return prompt
    raise RequestError(f"{field} must be a string or a non-empty list of token ids")


def _chat_ids(messages: Any) -> list[int]:
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages must be a non-empty list")
    parts = []
    for message in messages:
        content = message.get("content", "") if isinstance(message, dict) else ""
        if isinstance(content, list):  # content parts
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(f"<|{message.get('role', 'user')}|> {content}")
    return text_to_ids(" ".join(parts) + " <|assistant|>")


def _positive_int(value: Any, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RequestError(f"{field} must be an integer >= 1, got {value!r}")
    return value


def parse_request(api: str, body: Any, incremental: bool = False) -> GenerationRequest:
    """Read a request body of ``api`` (``generate``, ``completions`` or ``chat``).

    Raises:
        RequestError: the body is malformed.
    """
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object")
    if api == "generate":
        params = body.get("sampling_params") or {}
        if "input_ids" in body:
            if isinstance(body["input_ids"], str):
                raise RequestError("input_ids must be a non-empty list of token ids")
            ids = _prompt_ids(body["input_ids"], "input_ids")
        else:
            ids = _prompt_ids(body.get("text"), "text")
        max_new = params.get("max_new_tokens", SGLANG_DEFAULT_MAX_NEW)
        temperature = params.get("temperature", 1.0)
        ignore_eos = bool(params.get("ignore_eos", False))
    else:
        ids = (
            _chat_ids(body.get("messages"))
            if api == "chat"
            else _prompt_ids(body.get("prompt"), "prompt")
        )
        max_new = body.get("max_completion_tokens") or body.get(
            "max_tokens", OPENAI_DEFAULT_MAX_TOKENS
        )
        temperature = body.get("temperature", 1.0)
        ignore_eos = bool(body.get("ignore_eos", False))
    options = body.get("stream_options") or {}
    return GenerationRequest(
        api=api,
        prompt_ids=ids,
        max_new_tokens=_positive_int(max_new, "max_new_tokens/max_tokens"),
        ignore_eos=ignore_eos,
        temperature=float(temperature if temperature is not None else 1.0),
        stream=bool(body.get("stream", False)),
        include_usage=bool(options.get("include_usage", False)),
        continuous_usage=bool(options.get("continuous_usage_stats", False)),
        incremental=incremental,
        rid=str(body.get("rid") or ""),
    )


@dataclass
class StreamCursor:
    """What a stream has sent so far (for deltas)."""

    sent_tokens: int = 0


def _usage(request: GenerationRequest, count: int) -> dict[str, int]:
    prompt = len(request.prompt_ids)
    return {"prompt_tokens": prompt, "completion_tokens": count, "total_tokens": prompt + count}


def _finish(request: GenerationRequest, count: int, total: int, done: bool) -> str | None:
    """``length`` when the request's token budget ended it, ``stop`` at the model's EOS."""
    if not done:
        return None
    return "length" if count >= request.max_new_tokens else "stop"


def _meta_info(
    request: GenerationRequest, rid: str, count: int, reason: str | None, meta: dict[str, Any]
) -> dict[str, Any]:
    info = {
        "id": rid,
        "finish_reason": None,
        "prompt_tokens": len(request.prompt_ids),
        "completion_tokens": count,
        **meta,
    }
    if reason == "length":
        info["finish_reason"] = {"type": "length", "length": count}
    elif reason == "stop":
        info["finish_reason"] = {"type": "stop", "matched": 151336}
    return info


def event(
    request: GenerationRequest,
    rid: str,
    output: Completion,
    count: int,
    done: bool,
    cursor: StreamCursor,
    meta: dict[str, Any],
    model: str,
    clock: tuple[float, float] | None = None,
) -> bytes:
    """The SSE line (``data: {...}``) of the streamed chunk after ``count`` tokens.

    ``clock`` is ``(arrived, now)`` on the emulator's virtual clock (server seconds): sent as
    ``"emulator_clock": [arrived, now]``, an emulator-only key a real SGLang never sends.
    """
    stamp = "" if clock is None else f', "emulator_clock": [{clock[0]:.7f}, {clock[1]:.7f}]'

    start = cursor.sent_tokens
    cursor.sent_tokens = count
    reason = _finish(request, count, len(output.ids), done)
    if request.api == "generate":
        first = start if request.incremental else 0
        info = json.dumps(_meta_info(request, rid, count, reason, meta))
        return (
            f'data: {{"text": "{output.text_between(first, count)}", "output_ids": '
            f'{output.ids_json(first, count)}, "meta_info": {info}{stamp}}}\n\n'
        ).encode()
    delta_text = output.text_between(start, count)
    choice: dict[str, Any] = {"index": 0, "logprobs": None, "finish_reason": reason}
    if request.api == "chat":
        choice["delta"] = (
            {"role": "assistant", "content": delta_text} if start == 0 else {"content": delta_text}
        )
    else:
        choice["text"] = delta_text
    chunk: dict[str, Any] = {
        "id": rid,
        "object": "chat.completion.chunk" if request.api == "chat" else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
    }
    if request.continuous_usage:
        chunk["usage"] = _usage(request, count)
    if clock is not None:
        chunk["emulator_clock"] = [round(clock[0], 7), round(clock[1], 7)]
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def usage_chunk(
    request: GenerationRequest,
    rid: str,
    count: int,
    model: str,
    clock: tuple[float, float] | None = None,
) -> bytes:
    """The SSE line of the final ``choices: []`` chunk that ``include_usage`` asks for, with
    the virtual ``clock`` as every other event has it (a client reading the emulator's clock
    refuses an event without one)."""
    kind = "chat.completion.chunk" if request.api == "chat" else "text_completion"
    chunk: dict[str, Any] = {
        "id": rid,
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": _usage(request, count),
    }
    if clock is not None:
        chunk["emulator_clock"] = [round(clock[0], 7), round(clock[1], 7)]
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def reply(
    request: GenerationRequest,
    rid: str,
    output: Completion,
    count: int,
    meta: dict[str, Any],
    model: str,
) -> dict[str, Any]:
    """The non-streamed answer."""
    reason = _finish(request, count, len(output.ids), True)
    if request.api == "generate":
        return {
            "text": output.text_of(count),
            "output_ids": list(output.ids[:count]),
            "meta_info": _meta_info(request, rid, count, reason, meta),
        }
    text = output.text_of(count)
    if request.api == "chat":
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": reason,
        }
        kind = "chat.completion"
    else:
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": reason}
        kind = "text_completion"
    return {
        "id": rid,
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": _usage(request, count),
    }
