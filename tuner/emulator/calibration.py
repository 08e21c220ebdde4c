"""The calibration of the emulated GLM-5 host, as data: the one copy of its numbers in the code.

Transcribed from ``../shared/reference/calibration.md`` (the one reading of the seeds the project
uses). The performance model, the start-up timeline, the failure thresholds and the stand-in
``nvidia-smi`` read their numbers from here; ``tests/emulator/test_calibration_table.py`` parses
the Markdown table (the project's copy, ``tests/fixtures/reference/calibration.md``) and checks
that this module agrees with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "CALIBRATION_LEVELS",
    "CALIBRATION_POINTS",
    "CRASH",
    "FIXED_ARGV",
    "GPU",
    "KV",
    "MEMORY_LIMITS",
    "STARTUP",
    "WORKLOAD",
    "CalibrationPoint",
    "point",
]

CRASH = "crash"  # a level at which the configuration crashes the server

# The concurrency levels of the table (the columns).
CALIBRATION_LEVELS = (64, 256, 512, 1024)

# Fixed flags of every configuration of the table.
FIXED_ARGV = (
    "--model-path",
    "/models/GLM-5-NVFP4",
    "--tp-size",
    "8",
    "--quantization",
    "modelopt_fp4",
    "--trust-remote-code",
    "--mem-fraction-static",
    "0.92",
)


@dataclass(frozen=True)
class CalibrationPoint:
    """One row of the calibration table.

    Attributes:
        id: ``B``, ``N-off``, ``N-on``, ``N-on-unpatched`` or ``F``.
        argv: the flags besides :data:`FIXED_ARGV`.
        patched_gate: the FlashInfer autotune gate has ``"flashinfer_cutlass",`` un-commented.
        forced_allreduce: the allreduce-fusion gate is patched to accept SM120.
        throughput: output tok/s by concurrency; :data:`CRASH` where the server crashes; a
            concurrency that is absent was not measured.
    """

    id: str
    argv: tuple[str, ...]
    patched_gate: bool
    forced_allreduce: bool
    throughput: Mapping[int, float | str] = field(default_factory=dict)

    def full_argv(self) -> list[str]:
        """The complete launch flags: the fixed ones, then this point's."""
        return [*FIXED_ARGV, *self.argv]


def _figures(**by_level: float | str) -> Mapping[int, float | str]:
    return MappingProxyType({int(key.lstrip("c")): value for key, value in by_level.items()})


_N_ON_ARGV = ("--moe-runner-backend", "flashinfer_cutlass", "--attention-backend", "flashinfer")

CALIBRATION_POINTS: tuple[CalibrationPoint, ...] = (
    CalibrationPoint(
        "B",
        (
            "--moe-runner-backend",
            "flashinfer_trtllm",
            "--attention-backend",
            "flashinfer",
            "--max-running-requests",
            "64",
        ),
        patched_gate=False,
        forced_allreduce=False,
        throughput=_figures(c64=757, c256=880, c512=880, c1024=880),
    ),
    CalibrationPoint(
        "N-off",
        (*_N_ON_ARGV, "--disable-cuda-graph"),
        patched_gate=True,
        forced_allreduce=False,
        throughput=_figures(c64=689, c256=1950, c512=CRASH),
    ),
    CalibrationPoint(
        "N-on",
        _N_ON_ARGV,
        patched_gate=True,
        forced_allreduce=False,
        throughput=_figures(c64=760, c256=2000, c512=2800, c1024=3740),
    ),
    CalibrationPoint(
        "N-on-unpatched",
        _N_ON_ARGV,
        patched_gate=False,
        forced_allreduce=False,
        throughput=_figures(c64=740, c256=1550, c512=2150, c1024=2800),
    ),
    CalibrationPoint(
        "F",
        (*_N_ON_ARGV, "--enable-flashinfer-allreduce-fusion"),
        patched_gate=True,
        forced_allreduce=True,
        throughput=_figures(c64=236, c256=236, c512=236, c1024=236),
    ),
)


def point(point_id: str) -> CalibrationPoint:
    """The calibration point ``point_id`` (``KeyError`` names the known ones)."""
    for candidate in CALIBRATION_POINTS:
        if candidate.id == point_id:
            return candidate
    known = ", ".join(p.id for p in CALIBRATION_POINTS)
    raise KeyError(f"no calibration point {point_id!r}: use one of {known}")


@dataclass(frozen=True)
class _Workload:
    input_len: int = 256
    output_len: int = 256
    requests_per_concurrency: int = 2
    min_requests: int = 128

    def num_requests(self, concurrency: int) -> int:
        """Requests of a level at ``concurrency``: 2c, at least 128."""
        return max(self.requests_per_concurrency * concurrency, self.min_requests)


# The calibration workload: random ids, fixed lengths, ignore_eos, closed loop.
WORKLOAD = _Workload()


@dataclass(frozen=True)
class _Gpu:
    count: int = 8
    name: str = "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"
    compute_cap: str = "12.0"
    memory_mib: int = 97887
    power_limit_w: float = 600.0
    power_busy_w: tuple[float, float] = (230.0, 280.0)  # rises weakly with throughput


GPU = _Gpu()


@dataclass(frozen=True)
class _Kv:
    tokens_at_reference: int = 495_488  # at --mem-fraction-static 0.92
    reference_fraction: float = 0.92
    zero_fraction: float = 0.40  # tokens ~ ref * (f - 0.40) / 0.52
    pool_gb_at_reference: float = 25.49  # per GPU
    free_gb_at_reference: float = 5.70  # per GPU, after the pool
    peak_output_tokens_per_s: float = 4000.0  # N-on at c=1024, best single second

    def tokens(self, fraction: float) -> int:
        """KV pool size in tokens at ``--mem-fraction-static fraction``."""
        span = self.reference_fraction - self.zero_fraction
        return int(self.tokens_at_reference * (fraction - self.zero_fraction) / span)


KV = _Kv()


@dataclass(frozen=True)
class _MemoryLimits:
    oom_at_start_fraction: float = 0.96  # f >= this: fails in CUDA graph capture
    oom_under_load_fraction: float = 0.94  # 0.94 <= f < 0.96: fails at c >= 1024 in decode
    oom_under_load_concurrency: int = 1024
    prefill_metadata_crash_concurrency: int = 512  # N-off (graphs off, NSA) crashes at c >= 512
    # Beyond the table, for soak tests (vllm#21410: a start that succeeds, then OOM under load):
    # at 0.94 <= f < 0.96 decode at >= 512 requests leaks; after 300 host seconds of it in all,
    # the server runs out of memory. A calibration level at c=512 lasts about 94 s, so only a
    # soak (`tuner validate`, 10 minutes) meets it.
    slow_leak_concurrency: int = 512
    slow_leak_after_s: float = 300.0


MEMORY_LIMITS = _MemoryLimits()


@dataclass(frozen=True)
class _Startup:
    shards: int = 83
    weights_gb: float = 405.0
    shards_per_s: tuple[float, float] = (3.0, 12.0)
    kv_and_warmup_s: float = 120.0
    autotune_s: tuple[float, float] = (30.0, 60.0)
    cuda_graph_capture_s: float = 20.0
    total_s: tuple[float, float] = (180.0, 240.0)  # until /health answers 200


STARTUP = _Startup()
