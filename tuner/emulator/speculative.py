"""Speculative decoding (GLM-5's MTP layer, SGLang's ``--speculative-algorithm NEXTN``) on the
emulated host: SGLang 0.5.9's rules for its flags, the acceptance length, and its cost.

SGLang's rules, as ``ServerArgs._handle_speculative_decoding`` of the 0.5.9 wheel applies them
(:func:`resolve_speculation`): ``NEXTN`` is renamed ``EAGLE``; with no ``--max-running-requests``
the cap becomes 48; the overlap scheduler is turned off (spec v2 is off by default); without
``--speculative-num-steps`` the other two must be unset too (``AssertionError``) and GLM-5 gets
``(3, 1, 4)`` (``auto_choose_speculative_params``); with ``--speculative-eagle-topk 1`` the draft
tokens become ``steps + 1``; a top-k above 1 with DSA's page size of 64 needs the flashinfer (or
fa3) attention backend (``ValueError``). EAGLE3 and STANDALONE need a draft model GLM-5 does not
ship, NGRAM is another algorithm: the emulator fails them at start.

The model (every number below is assumed; ``tuner/emulator/README.md`` lists each with its source):

- the acceptance of the k-th drafted token along the chain is ``FIRST_ACCEPT x DEPTH_DECAY^(k-1)``
  (DeepSeek-V3 technical report, arXiv 2412.19437 section 5.4.3: "85-90%" for the second token
  of its one MTP module; the decay with depth is invented); a top-k above 1 widens each depth
  to ``min(topk, (draft_tokens - 1) / depth)`` candidates, each missing independently (invented);
  the acceptance length is 1 (the verified token) plus the expected accepted run;
- one speculative round costs the target's forward of ``batch x draft_tokens`` tokens (the
  calibrated decode curve read at that many tokens: memory-bound and nearly free at small
  batches, compute-bound at large ones) plus ``steps`` draft forwards of ``DRAFT_STEP_SHARE`` of
  a target step each (invented), and yields ``accept_length`` tokens a request: the decode step
  of the batch core is that round's time over the acceptance length (tokens are averaged, not
  streamed in bursts);
- the MTP layer's weights and draft KV take ``SPEC_GB`` a GPU from the KV pool (invented).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DRAFT_STEP_SHARE",
    "FIRST_ACCEPT",
    "SPEC_GB",
    "Speculation",
    "SpeculationRefused",
    "decode_log_fields",
    "resolve_speculation",
    "speculative_metrics",
]

FIRST_ACCEPT = 0.87  # DeepSeek-V3 report: 85-90% acceptance of the second token (MTP depth 1)
DEPTH_DECAY = 0.85  # invented: each further step reuses the one MTP layer on its own guesses
DRAFT_STEP_SHARE = 0.12  # invented: one draft forward (one layer, the LM head, sampling, launches)
SPEC_GB = 0.8  # invented: MTP layer weights and draft KV, per GPU, from the KV pool
SPEC_MAX_RUNNING = 48  # SGLang 0.5.9: the cap when --max-running-requests is unset
GLM5_AUTO_PARAMS = (3, 1, 4)  # auto_choose_speculative_params for GlmMoeDsaForCausalLM
DSA_PAGE_SIZE = 64  # SGLang 0.5.9 sets page size 64 for DeepSeek DSA on CUDA
TOPK_BACKENDS = ("flashinfer", "fa3")
_NO_DRAFT_MODEL = ("EAGLE3", "STANDALONE")


class SpeculationRefused(Exception):
    """SGLang refuses the speculative flags at start; ``str()`` is the exception's last line."""


@dataclass(frozen=True)
class Speculation:
    """A speculative configuration SGLang starts: the chain's depth, its width, the tokens verified."""

    steps: int
    topk: int
    draft_tokens: int

    @property
    def accept_length(self) -> float:
        """Tokens a request gains per verify round (``accept len`` in SGLang's decode line)."""
        depth = max(1, min(self.steps, self.draft_tokens - 1))
        width = max(1.0, min(float(self.topk), (self.draft_tokens - 1) / depth))
        run, length = 1.0, 1.0
        for k in range(depth):
            accept = FIRST_ACCEPT * DEPTH_DECAY**k
            run *= 1.0 - (1.0 - accept) ** width
            length += run
        return length

    @property
    def accept_rate(self) -> float:
        """Accepted over drafted tokens per round, as SGLang 0.5.9 computes it."""
        return self.accept_length / self.draft_tokens

    def round_seconds(
        self, step: Callable[[int], float], raw: Callable[[int], float], batch: int
    ) -> float:
        """Seconds per output token of one request in a batch of ``batch`` decoding speculatively.

        Args:
            step: the non-speculative decode step of this engine at a batch size.
            raw: the calibrated curve without flag effects, to scale ``step`` to more tokens.
        """
        verify = step(batch) * raw(batch * self.draft_tokens) / raw(batch)
        draft = self.steps * DRAFT_STEP_SHARE * step(batch) * raw(batch * self.topk) / raw(batch)
        return (verify + draft) / self.accept_length


def resolve_speculation(args: dict[str, Any], attention: str) -> Speculation | None:
    """SGLang's rules on ``args`` (updated in place as SGLang updates its own), or None.

    Raises:
        SpeculationRefused: what SGLang (or the model loader) raises at start.
    """
    algorithm = args["speculative_algorithm"]
    if algorithm is None:
        return None
    if algorithm == "NGRAM":
        raise SpeculationRefused(
            "ValueError: emulator: NGRAM speculative decoding is not modelled"
        )
    if algorithm in _NO_DRAFT_MODEL:
        raise SpeculationRefused(
            "OSError: GLM-5 ships no EAGLE3/standalone draft model; set "
            "--speculative-draft-model-path (or use NEXTN, its MTP layer)"
        )
    args["speculative_algorithm"] = "EAGLE"  # NEXTN is EAGLE on the model's own MTP layer
    if args["max_running_requests"] is None:
        args["max_running_requests"] = SPEC_MAX_RUNNING
    args["disable_overlap_schedule"] = True
    steps, topk, draft = (
        args["speculative_num_steps"],
        args["speculative_eagle_topk"],
        args["speculative_num_draft_tokens"],
    )
    if steps is None:
        if topk is not None or draft is not None:
            raise SpeculationRefused("AssertionError")  # the bare assert of 0.5.9
        steps, topk, draft = GLM5_AUTO_PARAMS
    topk = 1 if topk is None else topk
    if topk == 1:
        draft = steps + 1
    elif attention not in TOPK_BACKENDS:
        raise SpeculationRefused(
            "ValueError: speculative_eagle_topk > 1 with page_size > 1 is unstable and produces "
            "incorrect results for paged attention backends. This combination is only supported "
            "for the 'flashinfer' backend."
        )
    draft = draft if draft is not None else steps + 1
    return Speculation(steps, topk, draft)


def speculative_metrics(speculation: Speculation | None) -> dict[str, float]:
    """The values of SGLang's ``sglang:spec_accept_length`` and ``sglang:spec_accept_rate``
    gauges for a server started with ``speculation`` (0 without speculation, as SGLang reports),
    for the emulator's ``/metrics`` (``EngineSettings.speculation``)."""
    if speculation is None:
        return {"sglang:spec_accept_length": 0.0, "sglang:spec_accept_rate": 0.0}
    return {
        "sglang:spec_accept_length": round(speculation.accept_length, 4),
        "sglang:spec_accept_rate": round(speculation.accept_rate, 4),
    }


def decode_log_fields(speculation: Speculation | None) -> str:
    """What SGLang 0.5.9 adds to a speculative engine's ``Decode batch`` line
    (``scheduler_metrics_mixin.py``: ``accept len: {:.2f}, accept rate: {:.2f}, ``)."""
    if speculation is None:
        return ""
    return (
        f"accept len: {speculation.accept_length:.2f}, "
        f"accept rate: {speculation.accept_rate:.2f}, "
    )
