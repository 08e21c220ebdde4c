"""What the emulated model says: deterministic token ids and text, or fa3's garbage.

Greedy output (temperature 0) depends only on the prompt: a hash of the prompt's token ids seeds
the ids, so every configuration that works answers a prompt identically and a correctness probe
can compare them. fa3 attention on SM120 yields NaN logits, whose argmax is token 0, ``!``:
:func:`completion` then returns ``!!!!...`` at full speed. Words are made of syllables so the
text is readable enough to see in a log.
"""

from __future__ import annotations

import hashlib
import random
import re
from array import array
from dataclasses import dataclass
from functools import cache
from itertools import accumulate

__all__ = ["VOCAB_SIZE", "Completion", "completion", "text_to_ids"]

VOCAB_SIZE = 154_880  # GLM-5
_CONSONANTS = "bdfghklmnprstvz"
_VOWELS = "aeiou"
_GARBAGE_ID = 0
_DISTINCT_WORDS = 8192  # ids map onto this many words (a power of two)
_ID_SPAN = 1 << 16  # greedy ids are drawn from 1..65536, a part of the vocabulary
_WORD = re.compile(r"\S+")


def text_to_ids(text: str) -> list[int]:
    """Token ids of a text prompt: one per word, from a stable hash of the word."""
    ids = []
    for word in _WORD.findall(text):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        ids.append(int.from_bytes(digest, "little") % VOCAB_SIZE)
    return ids or [1]


def _word(token_id: int) -> str:
    letters = []
    value = token_id
    for _ in range(2 + token_id % 3):
        value, consonant = divmod(value, len(_CONSONANTS))
        value, vowel = divmod(value, len(_VOWELS))
        letters.append(_CONSONANTS[consonant] + _VOWELS[vowel])
    return " " + "".join(letters)


@cache
def _tables() -> tuple[list[str], list[str]]:
    """Spellings by ``id % 8192`` (``!`` for the garbage id 0 is separate) and ids as text."""
    words = [_word(index or _DISTINCT_WORDS) for index in range(_DISTINCT_WORDS)]
    return words, [str(token) for token in range(_ID_SPAN + 1)]


@dataclass(frozen=True)
class Completion:
    """The whole output of one request; streams cut it at token counts.

    The text needs no JSON escaping (letters, spaces and ``!``), so a stream can put slices of
    :attr:`text` and :attr:`ids_csv` into its events without encoding them again.

    Attributes:
        ids: output token ids.
        text: the detokenized output.
        offsets: ``offsets[n]`` is the length of the text of the first ``n`` tokens.
        ids_csv: the ids joined with ``", "``.
        ids_offsets: ``ids_offsets[n]`` is the length of ``ids_csv`` for the first ``n`` ids.
    """

    ids: tuple[int, ...]
    text: str
    offsets: tuple[int, ...]
    ids_csv: str
    ids_offsets: tuple[int, ...]

    def text_of(self, count: int) -> str:
        """The text of the first ``count`` tokens."""
        return self.text[: self.offsets[count]]

    def text_between(self, start: int, end: int) -> str:
        """The text of tokens ``start`` to ``end`` (exclusive)."""
        return self.text[self.offsets[start] : self.offsets[end]]

    def ids_json(self, start: int, end: int) -> str:
        """The JSON array of ids ``start`` to ``end`` (exclusive)."""
        first = self.ids_offsets[start] + (2 if start else 0)
        return "[" + self.ids_csv[first : self.ids_offsets[end]] + "]" if end > start else "[]"


def completion(
    prompt_ids: list[int],
    length: int,
    *,
    garbage: bool = False,
    temperature: float = 0.0,
    seed: int | None = None,
) -> Completion:
    """The ``length`` output tokens for a prompt.

    Args:
        prompt_ids: the prompt's token ids.
        length: tokens to produce.
        garbage: fa3 on SM120: every token is ``!``.
        temperature: 0 is greedy (a function of the prompt alone); above 0 also of ``seed``.
        seed: varies sampled output (ignored when greedy).
    """
    spellings, numerals = _tables()
    if garbage:
        ids = [_GARBAGE_ID] * length
        words = ["!"] * length
    else:
        digest = hashlib.blake2b(array("q", prompt_ids).tobytes(), digest_size=8).digest()
        base = int.from_bytes(digest, "little")
        if temperature > 0:
            base ^= (seed if seed is not None else random.getrandbits(63)) * 0x9E3779B97F4A7C15
        ids = [value + 1 for value in array("H", random.Random(base).randbytes(2 * length))]
        words = [spellings[token & (_DISTINCT_WORDS - 1)] for token in ids]
    numbers = [numerals[token] for token in ids]
    offsets = (0, *accumulate(map(len, words)))
    ids_offsets = (0, *accumulate(len(n) + 2 for n in numbers))
    ids_offsets = (0, *(end - 2 for end in ids_offsets[1:]))
    return Completion(tuple(ids), "".join(words), offsets, ", ".join(numbers), ids_offsets)
