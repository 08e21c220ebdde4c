"""The ``fit:`` section: whether a configuration's parallel layout can hold the model at all.

Checked with the constraints, before any host time: the weights split over tensor x pipeline
parallel ranks must fit one GPU, the ranks must be GPUs the host has, and the tensor-parallel
ranks of attention must divide its heads. The parallel sizes are read from the configuration's
own command line (its parameters and the fixed flags), through the flags the engine profile
names (``parallel_flags``: SGLang's ``--tp-size``, ``--pp-size``, ``--dp-size`` and
``--enable-dp-attention``); each refusal states its arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import field_validator

from tuner.space._problems import FieldProblem
from tuner.space._strict import StrictModel

if TYPE_CHECKING:
    from tuner.engines._profile import ParallelKind

__all__ = ["FitSection", "Layout", "layout_of"]


@dataclass(frozen=True)
class Layout:
    """The parallel sizes of one launch."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    dp_attention: bool = False

    @property
    def gpus(self) -> int:
        """GPUs the server takes: tp x pp, times dp unless DP attention runs inside the TP group."""
        return self.tp * self.pp * (1 if self.dp_attention else self.dp)

    @property
    def attention_tp(self) -> int:
        """Ranks one attention layer's heads are split over (tp / dp with DP attention)."""
        return self.tp // self.dp if self.dp_attention and self.dp > 0 else self.tp


def layout_of(args: Sequence[str], flags: Mapping[ParallelKind, str]) -> Layout:
    """The layout of a command line, through the profile's ``parallel_flags`` (tp, pp, dp:
    numbers; dp_attention: a switch). A size given twice takes the last, as argparse does."""
    sizes: dict[str, object] = {}
    by_flag = {flag: role for role, flag in flags.items()}
    for position, word in enumerate(args):
        role = by_flag.get(word)
        if role == "dp_attention":
            sizes[role] = True
        elif role is not None and position + 1 < len(args) and args[position + 1].isdigit():
            sizes[role] = int(args[position + 1])
    return Layout(**sizes)  # type: ignore[arg-type]


class FitSection(StrictModel):
    """The model and the host's GPUs, for the arithmetic of :meth:`problems`."""

    weights_gb: float  # the checkpoint's size (GLM-5-NVFP4: 405 GB)
    gpu_memory_gb: float  # one GPU's memory (RTX PRO 6000 Blackwell: 97,887 MiB = 95.6 GiB)
    gpus: int  # GPUs on the host
    attention_heads: int | None = None  # the attention TP size must divide them

    @field_validator("weights_gb", "gpu_memory_gb", "gpus")
    @classmethod
    def _positive(cls, value: float) -> float:
        if value <= 0:
            raise FieldProblem(
                f"must be above 0 (got {value})", "give the size as a positive number"
            )
        return value

    def problems(self, layout: Layout) -> list[str]:
        """Why ``layout`` cannot hold the model here, each with its arithmetic (empty: it can)."""
        found = []
        shards = layout.tp * layout.pp
        per_gpu = self.weights_gb / shards
        if per_gpu > self.gpu_memory_gb:
            need = math.ceil(self.weights_gb / self.gpu_memory_gb)
            found.append(
                f"does not fit: weights {self.weights_gb:g} GB / (tp {layout.tp} x pp {layout.pp}) "
                f"= {per_gpu:.1f} GB a GPU > {self.gpu_memory_gb:g} GB of GPU memory, before any "
                f"KV cache; fix: tp x pp >= {need}"
            )
        if layout.gpus > self.gpus:
            dp = "" if layout.dp_attention else f" x dp {layout.dp}"
            found.append(
                f"does not fit: tp {layout.tp} x pp {layout.pp}{dp} = {layout.gpus} GPUs > the "
                f"host's {self.gpus}"
            )
        heads = self.attention_heads
        if heads is not None and layout.attention_tp and heads % layout.attention_tp:
            found.append(
                f"does not split: {heads} attention heads / attention tp {layout.attention_tp} "
                f"(tp {layout.tp}{f' / dp {layout.dp}' if layout.dp_attention else ''}) "
                f"= {heads / layout.attention_tp:.2f}, not whole"
            )
        return found
