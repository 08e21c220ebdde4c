"""Where a level's requests come from: random tokens, a dataset file, or generated shared prefixes.

A *request source* gives ``pick(count, seed, api)``: the prompts, the output length of each
request and the prompt's length in tokens. Token-id prompts have exact lengths; text prompts
(dataset files, or any prompt sent to the chat API) have estimated ones until the server counts
them (its ``usage``/``meta_info`` ``prompt_tokens``, recorded per request by the stream reader).

- :class:`RandomLengths`: random token ids; with ``range_ratio`` r < 1 each input and output
  length is drawn from ``[max(1, int(L*r)), L]`` (bench_serving's ``--random-range-ratio``).
- :class:`SharedPrefix`: ``groups`` prefixes of ``prefix_len`` random tokens, fixed for the whole
  study, each request one of them plus its own ``suffix_len`` tokens (bench_serving's
  ``generated-shared-prefix``): the workload of a chat service with long system prompts, where a
  prefix cache pays.
- :class:`FilePool`: a uniform sample of a dataset file (:func:`read_dataset`), read once.

Every source reads a *request stream*: ``pick(count, seed, api, first)`` gives requests
``first .. first + count - 1`` of the stream ``seed`` (a trial's). Levels of one trial take
consecutive places in it, so no two of them send the same prompt (unless the workload shares
prefixes on purpose): random prompts are drawn from a seed of the level's place, and a dataset
pool is gone through in a shuffled order, without replacement, before any prompt comes again;
:attr:`Picked.repeated` counts the requests of a level whose prompt the stream had already given.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from tuner.loadgen._dataset_files import TextRequest, estimate_tokens, read_dataset
from tuner.loadgen._prompts import PROMPT_TOKEN_RANGE, Prompt, ids_to_words

__all__ = [
    "FilePool",
    "Picked",
    "RandomLengths",
    "RequestSource",
    "SharedPrefix",
    "level_requests",
    "load_file_pool",
    "stream_seed",
]


@dataclass(frozen=True)
class Picked:
    """A level's requests: prompts, output lengths, prompt lengths, whether lengths are
    estimates (text without the server's count), and how many of the prompts the stream had
    already given before (a dataset pool smaller than the requests asked of it)."""

    prompts: list[Prompt]
    output_lens: list[int]
    prompt_lens: list[int]
    estimated: bool
    repeated: int = 0


class RequestSource(Protocol):
    """Anything that gives a level its requests."""

    def pick(self, count: int, seed: int | list[int], api: str, first: int = 0) -> Picked: ...

    def describe(self) -> str: ...


def stream_seed(seed: int | list[int], place: int) -> list[int]:
    """The seed of what starts at ``place`` of the stream ``seed`` (numpy's seed sequences
    ignore a trailing 0: the stream's first level draws what the stream's seed alone drew)."""
    return [*(seed if isinstance(seed, list) else [seed]), place]


def _random_ids(rng: np.random.Generator, length: int) -> list[int]:
    low, high = PROMPT_TOKEN_RANGE
    return rng.integers(low, high, size=length).tolist()


def _for_api(ids_prompts: list[list[int]], api: str) -> tuple[list[Prompt], bool]:
    if api == "openai-chat":
        return [ids_to_words(ids) for ids in ids_prompts], True
    return list(ids_prompts), False


@dataclass(frozen=True)
class RandomLengths:
    """Random token ids, lengths drawn from ``[max(1, int(L*range_ratio)), L]``."""

    input_len: int
    output_len: int
    range_ratio: float = 1.0

    def _lengths(self, rng: np.random.Generator, top: int, count: int) -> list[int]:
        low = max(1, int(top * self.range_ratio))
        return rng.integers(low, top + 1, size=count).tolist()

    def pick(self, count: int, seed: int | list[int], api: str, first: int = 0) -> Picked:
        rng = np.random.default_rng(stream_seed(seed, first))
        inputs = self._lengths(rng, self.input_len, count)
        outputs = self._lengths(rng, self.output_len, count)
        ids = [_random_ids(rng, n) for n in inputs]
        prompts, estimated = _for_api(ids, api)
        return Picked(prompts, outputs, inputs, estimated)

    def describe(self) -> str:
        return f"random (input {self.input_len}, output {self.output_len}, range_ratio {self.range_ratio})"


@dataclass(frozen=True)
class SharedPrefix:
    """``groups`` fixed prefixes of ``prefix_len`` tokens; each request one prefix and its own
    ``suffix_len`` random tokens; ``output_len`` tokens asked."""

    groups: int
    prefix_len: int
    suffix_len: int
    output_len: int
    prefix_seed: int = 0

    def prefixes(self) -> list[list[int]]:
        """The group prefixes (the same for every level and trial of a study)."""
        rng = np.random.default_rng([self.prefix_seed, 7])
        return [_random_ids(rng, self.prefix_len) for _ in range(self.groups)]

    def pick(self, count: int, seed: int | list[int], api: str, first: int = 0) -> Picked:
        rng = np.random.default_rng(stream_seed(seed, first))
        prefixes = self.prefixes()
        groups = rng.integers(0, self.groups, size=count).tolist()
        ids = [prefixes[g] + _random_ids(rng, self.suffix_len) for g in groups]
        prompts, estimated = _for_api(ids, api)
        length = self.prefix_len + self.suffix_len
        return Picked(prompts, [self.output_len] * count, [length] * count, estimated)

    def describe(self) -> str:
        return (
            f"shared_prefix ({self.groups} groups, prefix {self.prefix_len} tokens, "
            f"suffix {self.suffix_len}, output {self.output_len})"
        )


def _flatten(messages: tuple[dict[str, str], ...]) -> str:
    return "\n".join(f"{m['role']}: {m['content']}" for m in messages)


def _text_length(prompt: str | tuple[dict[str, str], ...]) -> int:
    if isinstance(prompt, str):
        return estimate_tokens(prompt)
    return sum(estimate_tokens(m["content"]) for m in prompt)


@dataclass(frozen=True)
class FilePool:
    """Requests sampled from a dataset file; ``max_output_len`` caps each output length and
    ``output_len`` (when set) replaces it."""

    path: Path
    format: str
    requests: tuple[TextRequest, ...]
    entries: int
    max_output_len: int = 2048
    output_len: int | None = None

    def order(self, count: int, seed: int | list[int], first: int = 0) -> list[int]:
        """Pool indices of places ``first .. first + count - 1`` of the stream ``seed``: one
        shuffle of the whole pool after another, so no entry comes twice within ``len(pool)``
        consecutive places."""
        if count <= 0:
            return []
        size = len(self.requests)
        first_pass, last_pass = first // size, (first + count - 1) // size
        shuffled = np.concatenate(
            [
                np.random.default_rng(stream_seed(seed, k)).permutation(size)
                for k in range(first_pass, last_pass + 1)
            ]
        )
        start = first - first_pass * size
        return shuffled[start : start + count].tolist()

    def repeats(self, count: int, first: int = 0) -> int:
        """How many of places ``first .. first + count - 1`` come after the pool ran out."""
        return count - max(0, min(first + count, len(self.requests)) - first)

    def pick(self, count: int, seed: int | list[int], api: str, first: int = 0) -> Picked:
        chosen = [self.requests[i] for i in self.order(count, seed, first)]
        prompts: list[Prompt] = []
        for request in chosen:
            if isinstance(request.prompt, str):
                prompts.append(request.prompt)
            elif api == "openai-chat":
                prompts.append([dict(m) for m in request.prompt])  # type: ignore[misc]  # chat messages: not in Prompt
            else:
                prompts.append(_flatten(request.prompt))
        outputs = [min(self.max_output_len, self.output_len or r.output_len) for r in chosen]
        return Picked(
            prompts,
            outputs,
            [_text_length(r.prompt) for r in chosen],
            True,
            self.repeats(count, first),
        )

    def describe(self) -> str:
        return f"{self.format} file {self.path} ({len(self.requests)} sampled of {self.entries})"


def load_file_pool(
    path: str | Path,
    *,
    sample: int = 2000,
    seed: int = 0,
    default_output_len: int = 256,
    max_output_len: int = 2048,
    output_len: int | None = None,
) -> FilePool:
    """Read a dataset file once (streamed) into a pool of at most ``sample`` requests."""
    found = read_dataset(path, sample, seed, default_output_len)
    return FilePool(
        found.path, found.format, found.requests, found.entries, max_output_len, output_len
    )


def level_requests(
    dataset: object,
    count: int,
    input_len: int,
    output_len: int,
    seed: int | list[int],
    api: str,
    first: int = 0,
) -> Picked:
    """A level's requests, places ``first ..`` of the stream ``seed``: fixed-length random
    tokens without a dataset, else the source's (a path is read here:
    callers that run many levels pass a source). ``output_len`` caps the source's output
    lengths (the short warm-up requests)."""
    if dataset is None:
        low, high = PROMPT_TOKEN_RANGE
        rng = np.random.default_rng(stream_seed(seed, first))
        ids = rng.integers(low, high, size=(count, input_len)).tolist()
        prompts, estimated = _for_api(ids, api)
        return Picked(prompts, [output_len] * count, [input_len] * count, estimated)
    source = load_file_pool(dataset) if isinstance(dataset, (str, Path)) else dataset
    picked = source.pick(count, seed, api, first)  # type: ignore[attr-defined]
    return Picked(
        picked.prompts,
        [min(output_len, n) for n in picked.output_lens],
        picked.prompt_lens,
        picked.estimated,
        picked.repeated,
    )
