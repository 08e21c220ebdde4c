"""Reading the user's dataset files as a stream: ShareGPT JSON, and JSONL of prompts or chats.

A ShareGPT file of ~90,000 conversations is ~600 MB: ``json.load`` of it holds several GB. Here
the top-level array is decoded one conversation at a time (``json.JSONDecoder.raw_decode`` on a
sliding buffer, in C) and only a uniform random sample of them is kept (reservoir sampling), so
memory is the buffer plus the sample, whatever the file's size. The format is chosen by the
file's content: a file starting with ``[`` is ShareGPT, one starting with ``{`` is JSONL.

A bad file is one :class:`ConfigError` line naming the file and the line.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuner.errors import ConfigError

__all__ = ["CHARS_PER_TOKEN", "FileSample", "TextRequest", "estimate_tokens", "read_dataset"]

# Without the model's tokenizer, a text's token count is estimated from its length (English text
# averages about four characters a token); the server's own count replaces it where it gives one.
CHARS_PER_TOKEN = 4
_CHUNK = 4 << 20
_DECODER = json.JSONDecoder()


def estimate_tokens(text: str) -> int:
    """An estimate of ``text``'s token count (at least 1)."""
    return max(1, round(len(text) / CHARS_PER_TOKEN))


@dataclass(frozen=True)
class TextRequest:
    """One request of a dataset file: text or chat messages, and the output length asked.

    ``output_len`` is the file's own number (JSONL) or an estimate from the reply's text
    (ShareGPT; ``output_estimated``).
    """

    prompt: str | tuple[dict[str, str], ...]
    output_len: int
    output_estimated: bool


@dataclass(frozen=True)
class FileSample:
    """The sampled requests of a file, and how many usable entries the file held."""

    path: Path
    format: str
    requests: tuple[TextRequest, ...]
    entries: int
    skipped: int


def _fail(path: Path, line: int | Callable[[], int], what: str, fix: str) -> ConfigError:
    return ConfigError(f"{path}:{line() if callable(line) else line}: {what}; fix: {fix}")


def _array_items(path: Path) -> Iterator[tuple[Callable[[], int], Any]]:
    """``(line, item)`` for each item of the JSON array that the file holds, read in chunks;
    ``line()`` gives the item's line (counted only when asked: an error names it)."""
    with path.open("r", encoding="utf-8", errors="strict") as handle:
        buffer, position, lines_before, eof = (
            "",
            0,
            1,
            False,
        )  # lines_before: of the buffer's start

        def more() -> bool:
            nonlocal buffer, position, eof, lines_before
            chunk = handle.read(_CHUNK)
            if not chunk:
                eof = True
                return False
            lines_before += buffer.count("\n", 0, position)
            buffer = buffer[position:] + chunk
            position = 0
            return True

        def line_at(at: int) -> int:
            return lines_before + buffer.count("\n", 0, at)

        def skip_space() -> None:
            nonlocal position
            while True:
                while position < len(buffer) and buffer[position] in " \t\r\n":
                    position += 1
                if position < len(buffer) or not more():
                    return

        skip_space()
        if position >= len(buffer) or buffer[position] != "[":
            raise _fail(
                path,
                line_at(position),
                "not a JSON array of conversations",
                'start the file with "["',
            )
        position += 1
        first = True
        while True:
            skip_space()
            if position < len(buffer) and buffer[position] == "]":
                return
            if not first:
                if position >= len(buffer) or buffer[position] != ",":
                    raise _fail(
                        path,
                        line_at(position),
                        "expected ',' or ']' between conversations",
                        "the file must be one JSON array",
                    )
                position += 1
                skip_space()
            first = False
            while True:
                try:
                    item, end = _DECODER.raw_decode(buffer, position)
                    break
                except json.JSONDecodeError as exc:
                    if eof or not more():
                        raise _fail(
                            path,
                            line_at(exc.pos),
                            f"not valid JSON ({exc.msg})",
                            "repair the file or export it again",
                        ) from None
            start, position = position, end
            yield functools.partial(line_at, start), item


def _jsonl_items(path: Path) -> Iterator[tuple[int, Any]]:
    with path.open("r", encoding="utf-8", errors="strict") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                yield number, json.loads(text)
            except json.JSONDecodeError as exc:
                raise _fail(
                    path,
                    number,
                    f"not a JSON object ({exc.msg})",
                    'write one object a line, e.g. {"prompt": "...", "output_len": 128}',
                ) from None


def _sharegpt_request(line: int | Callable[[], int], item: Any, path: Path) -> TextRequest | None:
    """The first human turn and the reply after it; None for a conversation without them."""
    if not isinstance(item, dict):
        raise _fail(
            path,
            line,
            f"a conversation is a JSON object, not {type(item).__name__}",
            'use entries like {"conversations": [{"from": "human", "value": "..."}, ...]}',
        )
    turns = item.get("conversations", item.get("conversation"))
    if not isinstance(turns, list):
        raise _fail(
            path,
            line,
            "entry without a 'conversations' list",
            'use entries like {"conversations": [{"from": "human", "value": "..."}, ...]}',
        )
    if len(turns) < 2 or not all(isinstance(t, dict) for t in turns[:2]):
        return None  # as bench_serving does: a conversation needs a prompt and a reply
    ask, reply = turns[0], turns[1]
    text, answer = ask.get("value"), reply.get("value")
    if ask.get("from") not in ("human", "user") or not isinstance(text, str) or not text.strip():
        return None
    if not isinstance(answer, str) or not answer.strip():
        return None
    return TextRequest(text, estimate_tokens(answer), True)


def _jsonl_request(
    line: int | Callable[[], int], item: Any, path: Path, default_output_len: int
) -> TextRequest:
    fix = 'write {"prompt": "...", "output_len": 128} or {"messages": [{"role": "user", "content": "..."}]}'
    if not isinstance(item, dict):
        raise _fail(path, line, f"a line holds a JSON object, not {type(item).__name__}", fix)
    output_len = item.get("output_len", default_output_len)
    if not isinstance(output_len, int) or isinstance(output_len, bool) or output_len < 1:
        raise _fail(path, line, f"output_len {output_len!r} is not a positive integer", fix)
    if "prompt" in item:
        prompt = item["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise _fail(path, line, "prompt is not a non-empty string", fix)
        return TextRequest(prompt, output_len, False)
    messages = item.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _fail(path, line, "neither 'prompt' nor a 'messages' list", fix)
    for message in messages:
        if not (
            isinstance(message, dict)
            and isinstance(message.get("role"), str)
            and isinstance(message.get("content"), str)
        ):
            raise _fail(path, line, "a message lacks a string 'role' or 'content'", fix)
    return TextRequest(
        tuple({"role": m["role"], "content": m["content"]} for m in messages), output_len, False
    )


def _first_character(path: Path) -> str:
    with path.open("r", encoding="utf-8", errors="replace") as handle:
        while True:
            chunk = handle.read(4096)
            if not chunk:
                return ""
            stripped = chunk.lstrip()
            if stripped:
                return stripped[0]


def read_dataset(
    path: str | Path, sample: int, seed: int = 0, default_output_len: int = 256
) -> FileSample:
    """A uniform random sample of at most ``sample`` requests of the file, read once, as a stream.

    Raises:
        ConfigError: the file is missing, empty, of no known format, holds a bad entry (its line
            is named) or no usable one.
    """
    source = Path(path)
    if not source.is_file():
        raise ConfigError(f"{source}: dataset file not found; fix: give an existing file")
    first = _first_character(source)
    items: Iterator[
        tuple[int | Callable[[], int], Any]
    ]  # (its line, or a function giving it; the item)
    if first == "[":
        kind, items = "sharegpt", _array_items(source)
    elif first == "{":
        kind, items = "jsonl", _jsonl_items(source)
    else:
        raise _fail(
            source,
            1,
            "neither a ShareGPT JSON array nor JSONL",
            'give a ShareGPT file ("[{"conversations": ...}]") or JSONL of {"prompt", "output_len"}',
        )
    rng = random.Random(seed)
    kept: list[TextRequest] = []
    entries = skipped = 0
    try:
        for line, item in items:
            request = (
                _sharegpt_request(line, item, source)
                if kind == "sharegpt"
                else _jsonl_request(line, item, source, default_output_len)
            )
            if request is None:
                skipped += 1
                continue
            entries += 1
            if len(kept) < sample:
                kept.append(request)
            else:
                slot = rng.randrange(entries)
                if slot < sample:
                    kept[slot] = request
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{source}: not UTF-8 text ({exc.reason}); fix: save it as UTF-8"
        ) from None
    if not kept:
        raise ConfigError(
            f"{source}: no usable entry ({skipped} skipped: a ShareGPT conversation needs a human "
            "turn and a reply); fix: give a file with prompts"
        )
    return FileSample(source, kind, tuple(kept), entries, skipped)
