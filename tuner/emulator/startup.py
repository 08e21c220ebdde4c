"""The start-up of the emulated server: SGLang's log lines, at the calibration's pace / K.

:func:`run_startup` prints, in order (``sglang.md`` §3, ``calibration.md`` start-up):

1. weight loading over 83 safetensors shards at 3-12 shards/s, then ``Load weight end``;
2. the KV pool (``KV Cache is allocated. #tokens: N``) and about 2 minutes of allocation and
   warm-up;
3. ``Running FlashInfer autotune...`` / ``FlashInfer autotune completed.`` (30-60 s) when, and
   only when, the gate is patched and the MoE runner is flashinfer_cutlass;
4. ``Capture cuda graph bs [1, 2, ..., 512]`` (the batch sizes SGLang 0.5.9 captures: its list
   up to ``--cuda-graph-max-bs``, none above the running-request pool) and ``Capture cuda graph
   begin.`` (about 20 s) when CUDA graphs are on.

A configuration that fails at start fails at the step where SGLang would: out of memory while
loading (too few GPUs for the weights) or in graph capture, a kernel missing on SM120 at the
first forward, a patched file that no longer parses at import. Every duration is divided by
the time scale. The caller then starts serving and prints the ready line.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from tuner.emulator.calibration import STARTUP
from tuner.emulator.gpu_state import held_by_others
from tuner.emulator.engine_rules import (
    DEFAULT_CUDA_GRAPH_MAX_BS,
    GRAPH_GB_AT_DEFAULT,
    RUNTIME_GB,
    TOTAL_GB,
    WEIGHTS_GB,
    EngineSettings,
    StartFailure,
)
from tuner.emulator.sglang_log import SglangLog
from tuner.emulator.source_files import SourceState

__all__ = ["StartupPlan", "captured_batch_sizes", "plan_startup", "run_startup"]

TORCH_COMPILE_S = 90.0


@dataclass(frozen=True)
class StartupPlan:
    """Durations (host seconds) of the start-up phases of one server run."""

    shard_seconds: float  # per shard
    kv_and_warmup_s: float
    autotune_s: float  # 0 when the autotune does not run
    graph_capture_s: float  # 0 without CUDA graphs
    torch_compile_s: float

    @property
    def total_s(self) -> float:
        """The host seconds of a start-up that succeeds (``/server_info``: ``startup_s``)."""
        return (
            STARTUP.shards * self.shard_seconds
            + self.kv_and_warmup_s
            + self.autotune_s
            + self.graph_capture_s
            + self.torch_compile_s
        )


def plan_startup(settings: EngineSettings | StartFailure, rng: random.Random) -> StartupPlan:
    """Draw this run's phase durations (the shard rate and the autotune time vary by run)."""
    low, high = STARTUP.shards_per_s
    shard_seconds = 1.0 / rng.uniform(low, high)
    if isinstance(settings, StartFailure):
        return StartupPlan(shard_seconds, STARTUP.kv_and_warmup_s, 0.0, 0.0, 0.0)
    return StartupPlan(
        shard_seconds=shard_seconds,
        kv_and_warmup_s=STARTUP.kv_and_warmup_s,
        autotune_s=rng.uniform(*STARTUP.autotune_s) if settings.autotune else 0.0,
        graph_capture_s=STARTUP.cuda_graph_capture_s if settings.cuda_graphs else 0.0,
        torch_compile_s=TORCH_COMPILE_S if settings.torch_compile else 0.0,
    )


async def run_startup(
    log: SglangLog,
    settings: EngineSettings | StartFailure,
    source: SourceState,
    plan: StartupPlan,
    time_scale: float,
    on_memory: Callable[[int], None],
    gpus: tuple[int, ...] | None = None,
) -> StartFailure | None:
    """Print the start-up and wait through it; a failure is logged where it happens and returned.

    Args:
        settings: the configuration, or the failure that stops it (not a start-up check:
            those fail before anything is printed).
        on_memory: told the MiB in use on each GPU as the start-up proceeds.
        gpus: the GPUs the server uses (None: every GPU): memory other processes hold there is
            not free for it.
    """

    async def wait(host_seconds: float) -> None:
        await asyncio.sleep(host_seconds / time_scale)

    def fail(failure: StartFailure | None) -> StartFailure:
        assert failure is not None  # a stage is set only with its failure
        log.scheduler_exception("startup", failure.message)
        return failure

    if source.syntax_error is not None:
        log.syntax_error(*source.syntax_error)
        return StartFailure("startup-crash", "init", f"SyntaxError: {source.syntax_error[2]}")
    failure = settings if isinstance(settings, StartFailure) else settings.capture_failure
    failure = _held_memory_failure(settings, gpus) or failure
    stage = failure.stage if failure is not None else None
    log.tp(f"Load weight begin. avail mem={TOTAL_GB - RUNTIME_GB:.2f} GB")
    shards = STARTUP.shards
    fail_at = (
        int(shards * failure.at_shard_fraction)
        if failure is not None and stage == "load"
        else None
    )
    for shard in range(1, shards + 1):
        if fail_at is not None and shard > fail_at:
            return fail(failure)
        await wait(plan.shard_seconds)
        on_memory(int(1024 * (RUNTIME_GB + WEIGHTS_GB * shard / shards)))
        log.raw(
            f"Loading safetensors checkpoint shards: {100 * shard // shards:3d}% Completed | "
            f"{shard}/{shards} [00:{int(shard * plan.shard_seconds):02d}<00:00, "
            f"{1 / plan.shard_seconds:.2f}it/s]"
        )
    log.tp(
        f"Load weight end. type=GlmMoeDsaForCausalLM, dtype=torch.bfloat16, "
        f"avail mem={TOTAL_GB - RUNTIME_GB - WEIGHTS_GB:.2f} GB, mem usage={WEIGHTS_GB:.2f} GB."
    )
    if stage == "kv":
        return fail(failure)
    if stage == "init":
        await wait(plan.kv_and_warmup_s / 4)
        return fail(failure)
    assert isinstance(settings, EngineSettings)
    return await _memory_and_warmup(log, settings, plan, wait, on_memory)


def captured_batch_sizes(max_bs: int, pool_size: int) -> list[int]:
    """The batch sizes SGLang 0.5.9 captures in CUDA graphs (``server_args.py``
    ``_generate_cuda_graph_batch_sizes`` and ``cuda_graph_runner.py``
    ``get_batch_sizes_to_capture``): its list up to ``max_bs``; when that reaches above the
    request pool (``--max-running-requests``), the pool's size is added and nothing above it kept."""
    sizes = (
        [1, 2, 4, 8, 12]
        + list(range(16, 257, 8))
        + list(range(272, 512, 16))
        + list(range(512, max_bs + 1, 32))
    )
    sizes = [bs for bs in sizes if bs <= max_bs]
    if max(sizes) > pool_size:
        sizes.append(pool_size)
    return sorted({bs for bs in sizes if bs <= pool_size})


def _held_memory_failure(
    settings: EngineSettings | StartFailure, gpus: tuple[int, ...] | None = None
) -> StartFailure | None:
    """Out of memory while loading when other processes hold what this configuration needs on
    one of its GPUs (the previous server's lingering worker: the "phantom OOM" of a start after
    a stop; another user's job)."""
    held = held_by_others(os.getpid(), gpus)
    held_gb = sum(mib for _, mib in held) / 1024
    need_gb = (
        settings.mem_fraction * TOTAL_GB
        if isinstance(settings, EngineSettings)
        else WEIGHTS_GB + RUNTIME_GB
    )
    if not held or held_gb + need_gb <= TOTAL_GB:
        return None
    free_mib = max(0, int((TOTAL_GB - held_gb - RUNTIME_GB) * 1024))
    others = ", ".join(
        f"Process {pid} has {mib / 1024:.2f} GiB memory in use" for pid, mib in held
    )
    return StartFailure(
        "oom-at-start",
        "load",
        f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a "
        f"total capacity of {TOTAL_GB:.2f} GiB of which {free_mib} MiB is free. {others}.",
        at_shard_fraction=0.1,
    )


async def _memory_and_warmup(
    log: SglangLog,
    settings: EngineSettings,
    plan: StartupPlan,
    wait: Callable[[float], Awaitable[None]],
    on_memory: Callable[[int], None],
) -> StartFailure | None:
    kv_gb = settings.kv_gb
    log.tp(f"KV Cache is allocated. #tokens: {settings.kv_tokens}, KV size: {kv_gb:.2f} GB")
    used_gb = RUNTIME_GB + WEIGHTS_GB + kv_gb
    on_memory(int(1024 * used_gb))
    free_gb = TOTAL_GB * (1 - settings.mem_fraction) - RUNTIME_GB
    log.tp(f"Memory pool end. avail mem={free_gb:.2f} GB")
    await wait(plan.kv_and_warmup_s * 0.4)
    log.tp(
        f"max_total_num_tokens={settings.kv_tokens}, "
        f"chunked_prefill_size={settings.chunk_tokens}, max_prefill_tokens=16384, "
        f"max_running_requests={settings.max_running}, context_len=202752, "
        f"available_gpu_mem={free_gb:.2f} GB"
    )
    await wait(plan.kv_and_warmup_s * 0.6 + plan.torch_compile_s)
    if plan.autotune_s:
        log.tp("Running FlashInfer autotune...")
        await wait(plan.autotune_s)
        log.tp("FlashInfer autotune completed.")
    if plan.graph_capture_s:
        log.tp(
            f"Capture cuda graph bs {captured_batch_sizes(settings.cuda_graph_max_bs, settings.max_running)}"
        )
        log.tp(
            f"Capture cuda graph begin. This can take up to several minutes. "
            f"avail mem={free_gb:.2f} GB"
        )
        if settings.capture_failure is not None:
            await wait(plan.graph_capture_s / 4)
            log.scheduler_exception("startup", settings.capture_failure.message)
            return settings.capture_failure
        await wait(plan.graph_capture_s)
        graph_gb = GRAPH_GB_AT_DEFAULT * settings.cuda_graph_max_bs / DEFAULT_CUDA_GRAPH_MAX_BS
        on_memory(int(1024 * (used_gb + graph_gb)))
        log.tp(
            f"Capture cuda graph end. Time elapsed: {plan.graph_capture_s:.2f} s. "
            f"mem usage={graph_gb:.2f} GB. avail mem={free_gb - graph_gb:.2f} GB."
        )
    return None
