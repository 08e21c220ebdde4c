"""The correctness probe: a few fixed greedy prompts whose outputs are compared with the baseline's.

A configuration can serve garbage at full speed (SGLang's ``fa3`` attention on a GPU it does not
support): only its output shows it. Greedy outputs of two correct configurations may part after a
while (different kernels round differently), so an output matches when it shares at least half of
the baseline's text as a common prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.loadgen import Dialect, complete_many

__all__ = ["ProbeResult", "run_probe", "compare_outputs", "MATCH_PREFIX_FRACTION"]

MATCH_PREFIX_FRACTION = 0.5


@dataclass(frozen=True)
class ProbeResult:
    """The probe's outputs, and how many of them match the reference (None: no reference)."""

    outputs: tuple[str, ...]
    matching: int | None = None
    required: int | None = None

    @property
    def passed(self) -> bool:
        return self.matching is None or self.required is None or self.matching >= self.required


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def output_matches(output: str, reference: str) -> bool:
    """True when ``output`` starts like ``reference`` (half of it at least)."""
    if not reference:
        return output == reference
    return _common_prefix(output, reference) >= MATCH_PREFIX_FRACTION * len(reference)


def compare_outputs(outputs: list[str], reference: list[str], required: int) -> ProbeResult:
    """Count the outputs that match the reference, prompt by prompt."""
    matching = sum(output_matches(o, r) for o, r in zip(outputs, reference))
    return ProbeResult(tuple(outputs), matching, min(required, len(reference)))


def run_probe(
    base_url: str,
    api: str | Dialect,
    prompts: list[str],
    max_tokens: int,
    timeout_s: float,
    reference: list[str] | None = None,
    required: int = 1,
    headers: dict[str, str] | None = None,
) -> ProbeResult:
    """Send each prompt once (greedy) and compare with ``reference`` when there is one;
    ``headers`` go with every request (the server's API key)."""
    outputs = complete_many(base_url, api, prompts, max_tokens, timeout_s, headers)
    if reference is None:
        return ProbeResult(tuple(outputs))
    return compare_outputs(outputs, reference, required)
