"""Stand-in of ``sglang/srt/layers/communicator.py`` (SGLang 0.5.9), tuner emulator.

Only the allreduce-fusion gate is kept, ``apply_flashinfer_allreduce_fusion`` with the exact text
of SGLang 0.5.9 (``tests/real_sglang`` compares it with the published file). 0.5.9 allows the
fusion on SM90 and SM100; the emulated host is SM120. The emulated server reads this file at
start and evaluates the gate as an SM120 host would: a gate that accepts SM120, with
``--enable-flashinfer-allreduce-fusion``, takes the slow path.
"""

import torch

_is_cuda = True
_is_flashinfer_available = True
_is_sm90_supported = False
_is_sm100_supported = False


# TODO: According to the discussion in https://github.com/flashinfer-ai/flashinfer/issues/1223#issuecomment-3047256465
# We set the max token num to 128 for allreduce fusion with min-latency case(use_oneshot=True).
FUSE_ALLREDUCE_MAX_BATCH_SIZE = 2048


def is_dp_attention_enabled():
    """Stand-in: no DP attention on the emulated host."""
    return False


def get_global_server_args():
    """Stand-in: the server args of the running server (not available outside it)."""
    raise RuntimeError("only the emulated server knows its server args")


def apply_flashinfer_allreduce_fusion(batch_size: int):
    return (
        # NOTE: flashinfer 0.6.1 caused performance regression on sm100 for allreduce fusion
        # Ref: https://github.com/sgl-project/sglang/issues/17237
        (_is_sm90_supported or _is_sm100_supported)
        and _is_flashinfer_available
        and batch_size > 0
        and batch_size <= FUSE_ALLREDUCE_MAX_BATCH_SIZE
        and not is_dp_attention_enabled()
        and get_global_server_args().enable_flashinfer_allreduce_fusion
    )
