"""From SGLang server args to what the emulated engine is: limits, speed factors, failures.

The rules SGLang 0.5.9 applies to GLM-5 on SM120 (``sglang.md`` §1 start-up checks, §5 SM120
limits) and the emulator's documented flag effects (see :mod:`tuner.emulator.perf_model`).
:func:`resolve_settings` returns :class:`EngineSettings`, or the :class:`StartFailure` when the
configuration cannot start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tuner.emulator.calibration import GPU, KV, MEMORY_LIMITS
from tuner.emulator.versions import CALIBRATED, VERSIONS, installed
from tuner.emulator.parallelism import Parallelism, ParallelismRefused, resolve_parallelism
from tuner.emulator.speculative import (
    SPEC_GB,
    Speculation,
    SpeculationRefused,
    resolve_speculation,
)

__all__ = ["EngineSettings", "StartFailure", "resolve_settings"]

DEFAULT_MAX_RUNNING = 2048
DEFAULT_CHUNK_TOKENS = 8192
DEFAULT_CUDA_GRAPH_MAX_BS = 512  # SGLang's choice for TP8 on a 96 GB card
GRAPH_GB_AT_DEFAULT = 0.4  # per GPU, CUDA graphs up to a batch of 512 (invented)
TOKENS_PER_GB = KV.tokens_at_reference / KV.pool_gb_at_reference
DEFAULT_MEM_FRACTION = 0.88  # SGLang's automatic choice here (the table always sets 0.92)
MIN_RESERVE, MAX_RESERVE = 0.5, 1.1  # --schedule-conservativeness, as the share reserved
UNCHUNKED_PREFILL_TOKENS = 16384  # SGLang's --max-prefill-tokens default
BF16_KV_TOKENS = 0.9  # the DSA cache keeps its fp8 indexer keys either way (emulator reading)
# Invented speed effects (calibration.md: each at most +-10% alone; tuner/emulator/README.md).
RADIX_OFF_SPEED = VERSIONS[
    CALIBRATED
].radix_off_speed  # --disable-radix-cache: its bookkeeping goes
OVERLAP_OFF_SPEED = 0.94  # --disable-overlap-schedule
BF16_KV_SPEED = (1.02, 0.01)  # bf16 KV: +2% at a batch of 64, 1% less by 512
# Per GPU, from the calibration's pool (25.49 GB) and free memory (5.70 GB) at f = 0.92.
TOTAL_GB = GPU.memory_mib / 1024
WEIGHTS_GB = TOTAL_GB * KV.reference_fraction - KV.pool_gb_at_reference  # 62.45
RUNTIME_GB = TOTAL_GB * (1 - KV.reference_fraction) - KV.free_gb_at_reference  # context, NCCL

ATTENTION_SPEED = {
    "flashinfer": 1.0,
    "trtllm_mha": 1.0,
    "fa3": 1.0,
    "triton": 0.93,
    "flex_attention": 0.91,
    "torch_native": 0.90,
}
ATTENTION_START_ERRORS = {
    "nsa": "RuntimeError: deep_gemm.get_paged_mqa_logits_metadata is not supported on sm_120",
    "trtllm_mla": "RuntimeError: TllmGenFmhaRunner: Unsupported architecture",
    "cutlass_mla": "RuntimeError: cutlass_mla_decode requires sm_100a",
    "flashmla": "RuntimeError: FlashMLA is only supported on sm_90a",
    "fa4": "RuntimeError: FlashAttention-4 requires sm_100",
}
MOE_SPEED = {
    "flashinfer_cutlass": 1.0,
    "flashinfer_trtllm": 1.0,
    "auto": 0.92,
    "cutlass": 0.95,
    "triton": 0.85,
    "triton_kernel": 0.85,
}
MOE_START_ERRORS = {
    "deep_gemm": "ValueError: DeepGEMM MoE runner does not support modelopt_fp4 weights",
    "flashinfer_mxfp4": "ValueError: flashinfer_mxfp4 MoE runner requires mxfp4 quantization",
    "flashinfer_cutedsl": "RuntimeError: flashinfer_cutedsl MoE kernels require sm_100a",
}
CUTLASS_QUANT = ("modelopt_fp4", "modelopt_fp8", None)
TRTLLM_QUANT = ("modelopt_fp4", "fp8", "modelopt_fp8", "compressed-tensors", None)


@dataclass(frozen=True)
class StartFailure:
    """Why a configuration does not start, and where in the start-up it shows.

    Attributes:
        kind: ``refused``, ``startup-crash`` or ``oom-at-start``.
        stage: ``args`` (a start-up check), ``load`` (while loading shards), ``init`` (the first
            forward, after loading), ``kv`` (allocating the KV pool) or ``graphs`` (capture).
        message: the exception's last line.
        at_shard_fraction: for ``load``, how far loading got.
    """

    kind: str
    stage: str
    message: str
    at_shard_fraction: float = 0.0


@dataclass(frozen=True)
class EngineSettings:
    """Everything about a startable configuration that the timing depends on."""

    moe_backend: str
    moe_family: str  # cutlass | trtllm
    autotune: bool
    cuda_graphs: bool
    cuda_graph_max_bs: int
    attention_backend: str
    garbage_output: bool
    radix_cache: bool
    overlap_schedule: bool
    kv_cache_dtype: str
    kv_tokens: int
    kv_gb: float
    mem_fraction: float
    max_running: int
    chunk_tokens: int
    reserve_ratio: float
    crash_batch: int | None
    oom_under_load: bool
    forced_allreduce: bool
    torch_compile: bool
    capture_failure: StartFailure | None = None  # starts, then fails in CUDA graph capture
    parallel: Parallelism = Parallelism()  # TP8, no DP attention, no EP: the calibrated layout
    speculation: Speculation | None = None  # --speculative-algorithm NEXTN/EAGLE

    def speed_factor(self, batch: int) -> float:
        """Rate multiplier of the flags that act on every step (1.0 = N-on's flags)."""
        speed = ATTENTION_SPEED[self.attention_backend] * MOE_SPEED[self.moe_backend]
        speed *= self.parallel.speed(batch)
        if not self.radix_cache:
            speed *= installed().radix_off_speed  # RADIX_OFF_SPEED on 0.5.9; an upgrade changes it
        if not self.overlap_schedule:
            speed *= OVERLAP_OFF_SPEED
        if self.kv_cache_dtype == "bfloat16":  # no dequantisation; more bytes read
            gain, fade = BF16_KV_SPEED
            speed *= gain - fade * min(1.0, max(0.0, (batch - 64) / 448))
        return speed

    def failure_line(self, kind: str) -> str:
        """The last log line of a failure under load (``crash`` or ``oom``)."""
        if kind == "crash":
            return "AttributeError: 'PrefillMetadata' object has no attribute 'topk_indices'"
        return (
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.25 GiB. "
            f"GPU 0 has a total capacity of {GPU.memory_mib / 1024:.2f} GiB"
        )


def _refusal(args: dict[str, Any]) -> StartFailure | None:
    found = _refusal_line(args)
    return StartFailure("refused", "args", found) if found else None


def _refusal_line(args: dict[str, Any]) -> str | None:
    """SGLang's start-up checks, before anything loads (``sglang.md`` §1)."""
    quant, moe = args["quantization"], args["moe_runner_backend"]
    if moe == "flashinfer_cutlass":
        if quant not in CUTLASS_QUANT:
            return (
                f"AssertionError: Invalid quantization '{quant}'. FlashInfer Cutlass MOE "
                "supports only: 'modelopt_fp4', 'modelopt_fp8', or bfloat16 (None)."
            )
        if args["ep_size"] not in (1, args["tp_size"]):
            return (
                "AssertionError: The expert parallel size must be 1 or the same as the "
                "tensor parallel size"
            )
    if moe == "flashinfer_trtllm" and quant not in TRTLLM_QUANT:
        return (
            f"AssertionError: Invalid quantization '{quant}'. FlashInfer TRTLLM MOE supports "
            "only: 'modelopt_fp4', 'fp8', 'modelopt_fp8', 'compressed-tensors', or bfloat16 "
            "(None)."
        )
    if args["kv_cache_dtype"] not in ("auto", "bf16", "bfloat16", "fp8_e4m3"):
        return (
            "AssertionError: DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype"
        )
    if quant not in (None, "modelopt_fp4"):
        return (
            "ValueError: Quantization method specified in the model config (modelopt_fp4) does "
            f"not match the quantization method specified in the `quantization` argument "
            f"({quant})."
        )
    return None


def _start_failure(args: dict[str, Any], fraction: float) -> StartFailure | None:
    """Failures while loading and warming up: GPUs, weights, kernels, memory."""
    replicas = 1 if args["enable_dp_attention"] else max(1, args["dp_size"])
    if args["tp_size"] * args["pp_size"] * replicas > GPU.count:
        return StartFailure(
            "startup-crash", "load", "RuntimeError: CUDA error: invalid device ordinal"
        )
    per_gpu_gb = WEIGHTS_GB * GPU.count / (args["tp_size"] * args["pp_size"])
    usable_gb = TOTAL_GB - RUNTIME_GB
    if per_gpu_gb > usable_gb:
        return StartFailure(
            "oom-at-start",
            "load",
            (
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a "
                f"total capacity of {GPU.memory_mib / 1024:.2f} GiB of which 1.12 GiB is free."
            ),
            at_shard_fraction=usable_gb / per_gpu_gb,
        )
    moe, attention = args["moe_runner_backend"], _attention(args)
    prefill = args["prefill_attention_backend"] or attention
    if moe in MOE_START_ERRORS:
        return StartFailure("startup-crash", "init", MOE_START_ERRORS[moe])
    for backend in (attention, prefill):
        if backend not in ATTENTION_SPEED:
            return StartFailure(
                "startup-crash",
                "init",
                ATTENTION_START_ERRORS.get(
                    backend, f"RuntimeError: attention backend {backend} is not available on CUDA"
                ),
            )
    if fraction <= KV.zero_fraction + 0.01:
        return StartFailure(
            "oom-at-start",
            "kv",
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        )
    if fraction >= MEMORY_LIMITS.oom_at_start_fraction and args["disable_cuda_graph"]:
        return StartFailure(
            "oom-at-start",
            "init",
            "torch.OutOfMemoryError: CUDA out of memory. "
            "Tried to allocate 2.00 GiB during the warm-up forward.",
        )
    return None


def _attention(args: dict[str, Any]) -> str:
    backend = args["decode_attention_backend"] or args["attention_backend"] or "flashinfer"
    return "flashinfer" if backend == "trtllm_mha" else backend


def resolve_settings(
    args: dict[str, Any], patched_gate: bool, forced_allreduce: bool
) -> EngineSettings | StartFailure:
    """The engine these server args start, or the :class:`StartFailure` that stops them."""
    args = dict(args)  # SGLang's own adjustments (parallelism, speculation) change its args
    fraction = args["mem_fraction_static"] or DEFAULT_MEM_FRACTION
    failure = _refusal(args)
    try:
        parallel = resolve_parallelism(args)
        speculation = resolve_speculation(args, _attention(args))
    except (ParallelismRefused, SpeculationRefused) as refused:
        stage = getattr(refused, "stage", "args")  # a check at start, or the model at init
        if stage == "args":
            return failure or StartFailure("refused", stage, str(refused))
        return (
            failure
            or _start_failure(args, fraction)
            or StartFailure("startup-crash", stage, str(refused))
        )
    failure = failure or _start_failure(args, fraction)
    if failure:
        return failure
    moe = args["moe_runner_backend"]
    attention = _attention(args)
    prefill_attention = args["prefill_attention_backend"] or attention
    graphs = not args["disable_cuda_graph"]
    max_bs = args["cuda_graph_max_bs"] or DEFAULT_CUDA_GRAPH_MAX_BS
    graph_gb = GRAPH_GB_AT_DEFAULT * max_bs / DEFAULT_CUDA_GRAPH_MAX_BS if graphs else 0.0
    kv_dtype = "bfloat16" if args["kv_cache_dtype"] in ("bf16", "bfloat16") else "fp8_e4m3"
    dtype_tokens = BF16_KV_TOKENS if kv_dtype == "bfloat16" else 1.0
    kv_gb = (
        KV.pool_gb_at_reference
        * (fraction - KV.zero_fraction)
        / (KV.reference_fraction - KV.zero_fraction)
        + GRAPH_GB_AT_DEFAULT
        - graph_gb
    )
    kv_gb -= parallel.attention_gb() + (SPEC_GB if speculation else 0.0)
    if kv_gb <= 0:
        return StartFailure(
            "oom-at-start",
            "kv",
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        )
    kv_tokens = parallel.kv_tokens(int(kv_gb * TOKENS_PER_GB * dtype_tokens))
    if args["max_total_tokens"]:
        kv_tokens = min(kv_tokens, args["max_total_tokens"])
    chunk = args["chunked_prefill_size"] or DEFAULT_CHUNK_TOKENS
    if chunk < 0:
        chunk = UNCHUNKED_PREFILL_TOKENS
    flashinfer_attention = "flashinfer" in (attention, prefill_attention)
    crash = (
        MEMORY_LIMITS.prefill_metadata_crash_concurrency
        if not graphs and flashinfer_attention
        else None
    )
    oom = MEMORY_LIMITS.oom_under_load_fraction <= fraction < MEMORY_LIMITS.oom_at_start_fraction
    autotune = (
        moe == "flashinfer_cutlass" and patched_gate and not args["disable_flashinfer_autotune"]
    )
    return EngineSettings(
        moe_backend=moe,
        moe_family="trtllm" if moe == "flashinfer_trtllm" else "cutlass",
        autotune=autotune,
        cuda_graphs=graphs,
        cuda_graph_max_bs=max_bs if graphs else 0,
        attention_backend=attention,
        garbage_output="fa3" in (attention, prefill_attention),
        radix_cache=not args["disable_radix_cache"],
        overlap_schedule=not args["disable_overlap_schedule"],
        kv_cache_dtype=kv_dtype,
        kv_tokens=kv_tokens,
        kv_gb=kv_gb,
        mem_fraction=fraction,
        max_running=args["max_running_requests"] or DEFAULT_MAX_RUNNING,
        chunk_tokens=chunk,
        reserve_ratio=min(MAX_RESERVE, max(MIN_RESERVE, args["schedule_conservativeness"])),
        crash_batch=crash,
        oom_under_load=oom,
        forced_allreduce=forced_allreduce and args["enable_flashinfer_allreduce_fusion"],
        torch_compile=args["enable_torch_compile"],
        capture_failure=StartFailure(
            "oom-at-start",
            "graphs",
            "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB.",
        )
        if graphs and fraction >= MEMORY_LIMITS.oom_at_start_fraction
        else None,
        parallel=parallel,
        speculation=speculation,
    )
