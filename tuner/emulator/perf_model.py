"""The performance model of the emulated GLM-5 host: launch flags in, timing and failures out.

Pure: no HTTP, no clock. :func:`build_engine` turns SGLang flags (plus the two source patches)
into an :class:`EngineModel` or a :class:`Failure`; :func:`predict_throughput` runs the
calibration's closed loop on it in virtual time (:mod:`tuner.emulator.closed_loop`), so a search
benchmark can score configurations without a server. The server paces its tokens with the same
engine and the same :class:`~tuner.emulator.batch_core.BatchCore`, so both agree.

Calibrated (``calibration.md``; the fitted numbers live in :mod:`tuner.emulator.fitted`):

- decode step time by batch size for the ``flashinfer_cutlass`` MoE with CUDA graphs; the gain
  of FlashInfer autotune (patched gate, cutlass MoE, no ``--disable-flashinfer-autotune``); the
  eager penalty (``--disable-cuda-graph``, or a batch above ``--cuda-graph-max-bs``, whose
  default on this host is 512); ``flashinfer_trtllm`` at a batch of 64; the idle wake-up that
  makes B's c=64 slower than its queue-fed c >= 256; the forced allreduce-fusion slow path (F);
- saturation: ``--max-running-requests`` (default 2048) caps the batch; the KV pool (tokens
  ``495488 x (f - 0.40) / 0.52`` at ``--mem-fraction-static f``) holds ``input + output`` per
  request; the rest queue;
- failures: the PrefillMetadata crash (graphs off, flashinfer attention, batch >= 512); out of
  memory at start (f >= 0.96) and in decode (0.94 <= f < 0.96 and a batch >= 1000, which
  c >= 1024 reaches); fa3 attention serves garbage at full speed.

Documented effects of the other flags (the emulator's own reading; each alone stays within
+-10% of N-on at the calibration levels, which ``tests/emulator/test_perf_model.py`` checks, and
all of them together within 10% of N-on's 3,740 on the calibration workload, which
``tests/emulator/test_headroom.py`` checks; sizes below are against N-on, noiseless):

- ``--chunked-prefill-size S`` (default 8192; -1: unchunked, up to 16384 tokens a batch): each
  prefill batch costs ``CHUNK_OVERHEAD_S`` on top of ``tokens / PREFILL_TOKENS_PER_S``; 2048
  loses about 10% at c=1024, 16384 gains about 2%;
- ``--schedule-conservativeness x``: the share of the output reserved in the KV pool at
  admission (clamped to 0.5-1.1). Below 1 more requests run and the newest are retracted
  (``RETRACT_S`` = 0.2 s each, prefilled again later) when the pool fills: -7% at c=1024 on
  the calibration workload (two waves: the retractions cost more than the queue saved), +3% on
  one wave of 1,024 requests (the demo's: the queue's tail goes); above 1 fewer run: -7% at
  c=1024;
- ``--disable-radix-cache``: +1% (random prompts never hit the cache; its bookkeeping goes);
  with the cache on, a repeated prompt is not prefilled again;
- ``--cuda-graph-max-bs B`` (default 512 here): batches above B run eagerly; the graphs take
  ``GRAPH_GB_AT_DEFAULT`` = 0.4 GB a GPU at 512, in proportion to B, from the KV pool (64: -2.5%
  at c=256-512, -1% at c=1,024, +3% on one wave of 1,024; 1024: +1.5% at c=1,024);
- ``--kv-cache-dtype``: ``auto`` is fp8_e4m3 for DSA on SM120; ``bf16``/``bfloat16`` holds 0.9x
  the tokens, +2% at small batches (-2.5% at c=1,024: fewer requests fit); ``fp8_e5m2`` and
  ``fp4_e2m1`` are refused at start (DSA supports only bf16 and fp8_e4m3);
- attention backends: ``flashinfer`` (also unset, and ``trtllm_mha``, which falls back to it)
  1.00; ``triton`` -7%; ``flex_attention`` -9%; ``torch_native`` -10%; ``fa3`` full speed and
  garbage; ``nsa``, ``trtllm_mla``, ``cutlass_mla``, ``flashmla``, ``fa4`` and the non-CUDA
  ones fail at start on SM120;
- MoE runners: ``flashinfer_cutlass`` as calibrated; ``flashinfer_trtllm`` as B at a batch of
  64, scaling 20% worse up to 1024 (uncalibrated); ``auto`` -8% and ``cutlass`` -5% against
  flashinfer_cutlass without autotune; ``triton``/``triton_kernel`` -15%; ``deep_gemm``,
  ``flashinfer_mxfp4`` and ``flashinfer_cutedsl`` fail at start with an NVFP4 checkpoint;
- ``--disable-overlap-schedule``: -5%; ``--enable-torch-compile``: 90 s more start-up;
- ``--tp-size`` below 8 runs out of memory loading the weights; more GPUs than the host has (or
  than ``CUDA_VISIBLE_DEVICES`` lists, from ``--base-gpu-id``) fail at start.

Combinations beat N-on: ``--disable-radix-cache --chunked-prefill-size 16384
--mem-fraction-static 0.93`` is 2% faster at c=512 and 4% at c=1024. The best combination on the
calibration workload (:mod:`tuner.emulator.headroom`: adding ``--cuda-graph-max-bs 64
--schedule-conservativeness 0.5``) reads 4,019 at c=1,024, 7.5% above N-on: 1.1% from the
measured KV formula (0.93 instead of 0.92), the rest from the invented effects above. Flags
not named here are accepted and have no effect.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from tuner.emulator import fitted
from tuner.emulator.batch_core import CoreTiming
from tuner.emulator.calibration import MEMORY_LIMITS, WORKLOAD
from tuner.emulator.curves import interpolate
from tuner.emulator.cli_args import server_args_from_flags
from tuner.emulator.closed_loop import simulate_level
from tuner.emulator.engine_rules import EngineSettings, StartFailure, resolve_settings
from tuner.emulator.noise import Noise

__all__ = ["EngineModel", "Failure", "build_engine", "engine_from_settings", "predict_throughput"]

PREFILL_TOKENS_PER_S = 40_000.0  # host seconds; a chunk of 8192 tokens takes about 0.2 s
CHUNK_OVERHEAD_S = 0.08
SINGLE_STREAM_STEP_S = 0.030  # one request decodes at about 33 tok/s
GATHER_S = 0.5  # a burst of arrivals at an idle scheduler gathers this long
OOM_DECODE_BATCH = 1000
RETRACT_S = 0.2  # per retracted request: freeing its pages, re-forming the batch (invented)


@dataclass(frozen=True)
class Failure:
    """A configuration that does not serve.

    Attributes:
        kind: ``refused`` (a start-up check), ``startup-crash``, ``oom-at-start``,
            ``crash-under-load``, ``oom-under-load`` or ``wrong-output``.
        message: the last line SGLang prints (``AssertionError: ...``).
        at_concurrency: the level at which a failure under load happened.
        throughput: for ``wrong-output``, the speed at which the garbage is served.
    """

    kind: str
    message: str
    at_concurrency: int | None = None
    throughput: float | None = None


@dataclass(frozen=True)
class EngineModel:
    """A configuration the emulated host can start, with everything that sets its timing."""

    settings: EngineSettings
    step_by_batch: tuple[float, ...]  # decode step seconds for batch sizes 0..max_running

    def decode_step_s(self, batch: int) -> float:
        """Seconds of one decode step of ``batch`` requests (host time, no noise)."""
        table = self.step_by_batch
        if batch < len(table):
            return table[batch]
        return table[-1] * batch / (len(table) - 1)

    def prefill_s(self, tokens: int, chunks: int) -> float:
        """Seconds to prefill ``tokens`` tokens in ``chunks`` chunks (host time, no noise)."""
        return tokens / PREFILL_TOKENS_PER_S + chunks * CHUNK_OVERHEAD_S

    def timing(self, noise: Noise | None = None, time_scale: float = 1.0) -> CoreTiming:
        """The scheduler's view of this engine, every duration divided by ``time_scale``."""
        settings = self.settings
        factor = (lambda: noise.factor()) if noise is not None else (lambda: 1.0)

        def decode(batch: int) -> float:
            return self.decode_step_s(batch) * factor() / time_scale

        def prefill(tokens: int, chunks: int) -> float:
            return self.prefill_s(tokens, chunks) * factor() / time_scale

        return CoreTiming(
            decode_step=decode,
            prefill=prefill,
            wakeup_s=fitted.IDLE_WAKEUP_S / time_scale,
            gather_s=GATHER_S / time_scale,
            kv_tokens=settings.kv_tokens,
            max_running=settings.max_running,
            chunk_tokens=settings.chunk_tokens,
            reserve_ratio=settings.reserve_ratio,
            crash_batch=settings.crash_batch,
            oom_batch=OOM_DECODE_BATCH if settings.oom_under_load else None,
            retract_s=RETRACT_S / time_scale,
            leak_batch=MEMORY_LIMITS.slow_leak_concurrency if settings.oom_under_load else None,
            leak_after_s=MEMORY_LIMITS.slow_leak_after_s / time_scale,
        )


def _base_step(batch: int) -> float:
    """Decode step seconds of flashinfer_cutlass with CUDA graphs, before any gain."""
    points = ((1, SINGLE_STREAM_STEP_S), *fitted.CUTLASS_STEP_S)
    if batch <= points[-1][0]:
        return interpolate(points, batch)
    (b0, v0), (b1, v1) = points[-2], points[-1]
    return v1 + (v1 - v0) * (batch - b1) / (b1 - b0)


def _step_seconds(settings: EngineSettings, batch: int) -> float:
    """Host seconds per output token of a request in a decode batch of ``batch``."""
    if settings.speculation is not None:
        return settings.speculation.round_seconds(
            lambda size: _target_step(settings, size), _base_step, batch
        )
    return _target_step(settings, batch)


def _target_step(settings: EngineSettings, batch: int) -> float:
    speed = settings.speed_factor(batch)
    if settings.autotune:
        speed *= interpolate(fitted.AUTOTUNE_GAIN, batch)
    if not settings.cuda_graphs or batch > settings.cuda_graph_max_bs:
        speed *= interpolate(fitted.EAGER_GAIN, batch)
    if settings.moe_family == "trtllm":
        decay = interpolate(((64, 1.0), (1024, 0.80)), batch)
        speed *= fitted.TRTLLM_GAIN_64 * decay
    step = _base_step(batch) / speed
    if settings.forced_allreduce:
        step = max(step, interpolate(fitted.FORCED_ALLREDUCE_STEP_S, batch))
    return step


def build_engine(
    flags: Mapping[str, object], patched_gate: bool, forced_allreduce: bool
) -> EngineModel | Failure:
    """The engine these launch flags start, or the :class:`Failure` that stops it at start.

    Args:
        flags: SGLang flags to values (``{"--moe-runner-backend": "flashinfer_cutlass"}`` or
            ``{"moe_runner_backend": ...}``); switches are on when truthy; the rest default.
        patched_gate: the autotune gate file has ``"flashinfer_cutlass",`` un-commented.
        forced_allreduce: the allreduce-fusion gate accepts SM120.

    Raises:
        KeyError: a flag SGLang 0.5.9 does not have.
    """
    settings = resolve_settings(server_args_from_flags(flags), patched_gate, forced_allreduce)
    if isinstance(settings, StartFailure):
        return Failure(settings.kind, settings.message)
    if settings.capture_failure is not None:
        return Failure(settings.capture_failure.kind, settings.capture_failure.message)
    return engine_from_settings(settings)


def engine_from_settings(settings: EngineSettings) -> EngineModel:
    """The timing of a configuration that starts."""
    table = tuple(
        _step_seconds(settings, max(batch, 1)) for batch in range(settings.max_running + 1)
    )
    return EngineModel(settings, table)


def predict_throughput(
    flags: Mapping[str, object],
    patched_gate: bool,
    forced_allreduce: bool,
    concurrency: int,
    input_len: int = WORKLOAD.input_len,
    output_len: int = WORKLOAD.output_len,
    *,
    num_requests: int | None = None,
    rng: random.Random | None = None,
) -> float | Failure:
    """Output tokens per host second of one closed-loop level, or why there are none.

    Args:
        flags, patched_gate, forced_allreduce: as for :func:`build_engine`.
        concurrency: requests kept in flight.
        input_len, output_len: fixed lengths of every request (``ignore_eos``).
        num_requests: requests in the level (default: the calibration's 2c, at least 128).
        rng: draws the run's noise (a few percent); None predicts without noise.

    Returns:
        The level's output tok/s (all output tokens over the level's duration), or a
        :class:`Failure`: at start, under load (``at_concurrency``) or ``wrong-output``
        (whose ``throughput`` holds the speed of the garbage).
    """
    engine = build_engine(flags, patched_gate, forced_allreduce)
    if isinstance(engine, Failure):
        return engine
    requests = num_requests or WORKLOAD.num_requests(concurrency)
    noise = Noise(rng) if rng is not None else None
    result = simulate_level(engine.timing(noise), concurrency, requests, input_len, output_len)
    if isinstance(result, str):
        kind = "crash-under-load" if result == "crash" else "oom-under-load"
        return Failure(kind, engine.settings.failure_line(result), at_concurrency=concurrency)
    if engine.settings.garbage_output:
        return Failure(
            "wrong-output", "fa3 attention on SM120 serves NaN-derived garbage", throughput=result
        )
    return result
