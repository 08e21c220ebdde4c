"""Stand-in of ``sglang/srt/layers/communicator.py`` (SGLang 0.5.9), tuner emulator.

Only the allreduce-fusion gate is kept. SGLang 0.5.9 allows the fusion on SM90 and SM100; the
emulated host is SM120. The emulated server reads this file at start: a gate that also accepts
``_is_sm120_supported``, with ``--enable-flashinfer-allreduce-fusion``, takes the slow path.
"""

_is_sm90_supported = False
_is_sm100_supported = False
_is_sm120_supported = True
_is_flashinfer_available = True

FUSE_ALLREDUCE_MAX_BATCH_SIZE = 2048


def is_dp_attention_enabled():
    """Stand-in: no DP attention on the emulated host."""
    return False


def get_global_server_args():
    """Stand-in: the server args of the running server (not available outside it)."""
    raise RuntimeError("only the emulated server knows its server args")


def apply_flashinfer_allreduce_fusion(batch_size: int):
    return (
        (_is_sm100_supported or _is_sm90_supported)
        and _is_flashinfer_available
        and batch_size > 0
        and batch_size <= FUSE_ALLREDUCE_MAX_BATCH_SIZE
        and not is_dp_attention_enabled()
        and get_global_server_args().enable_flashinfer_allreduce_fusion
    )
