"""Prompts of exact length without a tokenizer: random token ids from a seed, or a dataset.

Random prompts are token ids drawn from :data:`PROMPT_TOKEN_RANGE`, low ids that every
tokenizer has (byte-level vocabularies hold at least 256), so the same prompts suit any model.
The OpenAI chat API takes text, not ids: its prompts are words from a fixed list, one word a
token on common tokenizers (the server's own ``prompt_tokens`` count is what is recorded).
A ShareGPT-style dataset gives the first human turn of each conversation as text.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tuner.errors import ConfigError

__all__ = ["PROMPT_TOKEN_RANGE", "Prompt", "ids_to_words", "load_sharegpt", "make_prompts"]

PROMPT_TOKEN_RANGE = (16, 256)

# A prompt is token ids (exact length) or text (the server counts its tokens).
Prompt = list[int] | str

_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "for",
    "on",
    "that",
    "with",
    "as",
    "it",
    "by",
    "at",
    "from",
    "this",
    "be",
    "are",
    "was",
    "or",
    "an",
    "have",
    "not",
    "you",
    "but",
    "all",
    "can",
    "has",
    "more",
    "one",
    "will",
    "they",
    "we",
    "their",
    "time",
    "new",
    "been",
    "about",
    "which",
    "other",
    "than",
    "out",
    "into",
    "some",
    "up",
    "only",
    "its",
    "over",
    "what",
    "when",
    "also",
    "after",
    "two",
    "first",
    "year",
    "most",
    "may",
    "make",
    "like",
    "way",
    "even",
    "back",
    "any",
    "use",
    "work",
    "could",
    "day",
    "long",
    "just",
    "how",
    "many",
    "world",
    "state",
    "such",
]


def ids_to_words(token_ids: list[int]) -> str:
    """Text with one common word per token id, for the chat API (deterministic)."""
    return " ".join(_WORDS[token_id % len(_WORDS)] for token_id in token_ids)


def random_token_prompts(count: int, input_len: int, seed: int | list[int]) -> list[list[int]]:
    """``count`` prompts of exactly ``input_len`` token ids, the same for the same seed."""
    low, high = PROMPT_TOKEN_RANGE
    rng = np.random.default_rng(seed)
    return rng.integers(low, high, size=(count, input_len)).tolist()


def load_sharegpt(path: str | Path) -> list[str]:
    """The first human turn of every conversation in a ShareGPT-style JSON file.

    Raises:
        ConfigError: the file is missing, is not JSON, or holds no conversation.
    """
    source = Path(path)
    try:
        document = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"{source}: dataset file not found: pass an existing JSON file"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"{source}: dataset is not readable JSON ({exc}): fix the file"
        ) from None
    if not isinstance(document, list):
        raise ConfigError(f"{source}: dataset must be a JSON list of conversations")
    prompts = []
    for entry in document:
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list) or not turns:
            continue
        first = turns[0]
        if isinstance(first, dict) and first.get("from") in ("human", "user"):
            text = first.get("value")
            if isinstance(text, str) and text.strip():
                prompts.append(text)
    if not prompts:
        raise ConfigError(
            f"{source}: dataset field conversations[0] holds no human turn: "
            'use entries like {"conversations": [{"from": "human", "value": "..."}]}'
        )
    return prompts


def make_prompts(
    count: int, input_len: int, seed: int | list[int], *, api: str, dataset: str | None = None
) -> list[Prompt]:
    """``count`` prompts for ``api``: token ids, chat text, or dataset text picked by seed."""
    if dataset is not None:
        pool = load_sharegpt(dataset)
        picks = np.random.default_rng(seed).integers(0, len(pool), size=count)
        return [pool[int(i)] for i in picks]
    prompts = random_token_prompts(count, input_len, seed)
    if api == "openai-chat":
        return [ids_to_words(ids) for ids in prompts]
    return list(prompts)
