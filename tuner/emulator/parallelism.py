"""Tensor, data-attention and expert parallelism on the emulated host: 8 PCIe cards, no NVLink.

SGLang 0.5.9's rules (``ServerArgs._handle_data_parallelism``, ``_handle_a2a_moe``,
``_handle_moe_kernel_config``, ``check_server_args`` of the wheel), applied by
:func:`resolve_parallelism` to the server args as SGLang applies them: ``--dp-size 1`` turns
``--enable-dp-attention`` off; with DP attention ``tp_size % dp_size == 0`` is asserted, the
schedule conservativeness is multiplied by 0.3 and the chunked prefill size divided by the DP
size (per rank: the ranks prefill side by side, so the emulator keeps the whole chunk); an
all-to-all MoE backend sets ``ep_size = tp_size``; ``--enable-two-batch-overlap`` needs one
(``ValueError``).

What the host does with them (assumed; ``tuner/emulator/README.md`` lists each with its source):

- GLM-5 has ``ATTENTION_HEADS`` heads (assumed); a TP size that does not divide them fails in
  the model's attention (``assert num_heads % attn_tp_size == 0``, ``deepseek_v2.py`` 0.5.9);
- the all-to-all backends need what these cards lack: DeepEP checks NVLink between every pair
  (``check_nvlink_connections`` in ``deep_ep/utils.py``), the others need RDMA, AMD or Ascend;
- under TP the MLA latent KV cache is held whole on every rank (one KV head); DP attention keeps
  each request's cache on one rank, so the pool holds ``dp`` times the tokens, less what the
  attention weights, replicated over ``tp / dp`` ranks instead of split over ``tp``, take
  (``ATTENTION_WEIGHTS_GB`` for the whole model: invented). SGLang's DP-attention announcement
  (v0.4, December 2024) gives the mechanism, not these sizes;
- the TP all-reduce over PCIe is part of the calibrated step (every calibrated point is TP8);
  DP attention trades it for an all-gather and a reduce-scatter around the MoE and runs each
  rank's attention on its share of the batch: slower at small batches (ranks wait for the
  busiest, padding), faster at large ones (``DP_ATTENTION_SPEED``, invented, for DP 8; DP 2 and 4
  scale the difference by ``(dp - 1) / 7``);
- EP without an all-to-all backend shards whole experts and keeps the all-reduce: the busiest
  rank sets the pace at small batches, larger per-expert GEMMs help at large ones
  (``EP_SPEED``, invented).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.emulator.curves import interpolate

__all__ = [
    "ATTENTION_HEADS",
    "ATTENTION_WEIGHTS_GB",
    "Parallelism",
    "ParallelismRefused",
    "resolve_parallelism",
]

ATTENTION_HEADS = 64  # assumed: GLM-5's config is not in this repository
ATTENTION_WEIGHTS_GB = 16.0  # invented: MLA + DSA indexer weights of the whole model, bf16
DP_ATTENTION_SPEED = ((1, 0.70), (64, 0.85), (256, 0.97), (512, 1.02), (1024, 1.04))  # invented
EP_SPEED = ((1, 0.96), (64, 0.96), (512, 1.0), (1024, 1.02))  # invented
A2A_START_ERRORS = {
    "deepep": "AssertionError: GPU 0 and GPU 1 are not connected via NVLink",
    "mooncake": "ImportError: Mooncake EP needs the mooncake transfer engine with RDMA devices; "
    "none found",
    "mori": "RuntimeError: MoRI EP is only supported on AMD GPUs",
    "ascend_fuseep": "RuntimeError: Ascend fused EP requires an Ascend NPU",
    "flashinfer": "RuntimeError: FlashInfer MoE A2A needs multi-node NVLink (MNNVL), not "
    "available on these GPUs",
}


class ParallelismRefused(Exception):
    """The parallel flags fail: ``str()`` is the last line, ``stage`` where it shows."""

    def __init__(self, message: str, stage: str) -> None:
        super().__init__(message)
        self.stage = stage  # args (a start-up check) or init (the model or the MoE backend)


@dataclass(frozen=True)
class Parallelism:
    """The parallel layout a server starts with (the calibrated one: TP8, no DP, no EP)."""

    tp: int = 8
    dp_attention: int = 1  # the DP size with --enable-dp-attention, else 1
    ep: int = 1

    def speed(self, batch: int) -> float:
        """Decode rate multiplier against the calibrated TP8 layout (1.0 there)."""
        speed = 1.0
        if self.dp_attention > 1:
            share = (self.dp_attention - 1) / 7
            speed *= 1.0 + (interpolate(DP_ATTENTION_SPEED, batch) - 1.0) * share
        if self.ep > 1:
            speed *= interpolate(EP_SPEED, batch)
        return speed

    def attention_gb(self) -> float:
        """Attention weights per GPU beyond the calibrated TP8 split (0 without DP attention)."""
        if self.dp_attention == 1:
            return 0.0
        return ATTENTION_WEIGHTS_GB * (self.dp_attention / self.tp - 1 / self.tp)

    def kv_tokens(self, per_rank_tokens: int) -> int:
        """The tokens the engine holds: one pool per DP-attention rank, else one shared pool."""
        return per_rank_tokens * self.dp_attention


def resolve_parallelism(args: dict[str, Any]) -> Parallelism:
    """SGLang's rules on ``args`` (updated in place as SGLang updates its own).

    Raises:
        ParallelismRefused: a start-up check, or a failure of the model or the MoE backend.
    """
    tp, a2a = args["tp_size"], args["moe_a2a_backend"]
    if args["dp_size"] == 1:
        args["enable_dp_attention"] = False
    if args["enable_two_batch_overlap"] and a2a == "none":
        raise ParallelismRefused(
            "ValueError: When enabling two batch overlap, moe_a2a_backend cannot be 'none'.",
            "args",
        )
    dp_attention = 1
    if args["enable_dp_attention"]:
        if tp % args["dp_size"]:
            raise ParallelismRefused("AssertionError", "args")  # assert tp_size % dp_size == 0
        dp_attention = args["dp_size"]
        args["schedule_conservativeness"] *= 0.3
    if a2a != "none":
        args["ep_size"] = tp
        raise ParallelismRefused(A2A_START_ERRORS[a2a], "init")
    if ATTENTION_HEADS % (tp // dp_attention):
        raise ParallelismRefused("AssertionError", "init")  # assert num_heads % attn_tp_size == 0
    return Parallelism(tp=tp, dp_attention=dp_attention, ep=args["ep_size"])
