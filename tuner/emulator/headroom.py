"""How far the emulator's own effects carry a configuration above the seeds' best (N-on).

``calibration.md`` measured five configurations; every other flag's effect is the emulator's
reading ("each at most +-10% alone, at least one combination beats N-on by a few percent").
A figure above N-on's is therefore the model's extrapolation, not a reading of the seeds.
:func:`best_figure` searches every combination of the flags whose effects can raise the figure
(:data:`SEARCHED`), on a given workload, and :func:`contributions` says how much each flag of
the best adds, the measured one first (``--mem-fraction-static``: the KV pool's formula is
``calibration.md``'s), then the invented ones.
``tests/emulator/test_headroom.py`` holds the best on the calibration workload within
:data:`BOUND` of N-on; ``bench/emulated_headroom.py`` prints the figures on the calibration
workload and on the demo's.

The other flags of ``search_spaces/glm5.yaml`` only lower the figure alone (MoE runners other
than ``flashinfer_cutlass`` with the patched gate, attention backends other than flashinfer,
CUDA graphs off, a cap below the concurrency, allreduce fusion: ``test_perf_model.py``), so they
are left at N-on's values.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from tuner.emulator.calibration import WORKLOAD, point
from tuner.emulator.cli_args import parse_server_args
from tuner.emulator.perf_model import predict_throughput

__all__ = [
    "BOUND",
    "MEASURED_FLAGS",
    "SEARCHED",
    "Contribution",
    "Figure",
    "Workload",
    "best_figure",
    "calibration_workload",
    "contributions",
    "seeds_figure",
]

# The best configuration on the calibration workload stays within this factor of N-on's figure
# (calibration.md: "a few percent").
BOUND = 1.10

# flag -> the values tried (None: flag left out, True: a bare switch). --mem-fraction-static
# stops at 0.93: 0.94-0.95 run out of memory at c=1024 and 0.96 at start (calibration.md).
# --chunked-prefill-size -1 is 16384 with these 256-token prompts; 16384 stands for both.
SEARCHED: Mapping[str, tuple[object, ...]] = {
    "--mem-fraction-static": (0.92, 0.93),
    "--cuda-graph-max-bs": (None, 64, 128, 256),
    "--chunked-prefill-size": (None, 16384),
    "--schedule-conservativeness": (None, 0.5, 0.9),
    "--disable-radix-cache": (None, True),
    "--kv-cache-dtype": (None, "bf16"),
}
_SEEDS = point("N-on")  # the seeds' best: flashinfer_cutlass, the patched gate, CUDA graphs on


@dataclass(frozen=True)
class Workload:
    """One closed-loop level of fixed-length requests."""

    name: str
    concurrency: int
    num_requests: int
    input_len: int = WORKLOAD.input_len
    output_len: int = WORKLOAD.output_len


def calibration_workload(concurrency: int = 1024) -> Workload:
    """The calibration workload's level at ``concurrency`` (2c requests, at least 128)."""
    return Workload("calibration", concurrency, WORKLOAD.num_requests(concurrency))


@dataclass(frozen=True)
class Figure:
    """A configuration (N-on plus ``flags``) and its noiseless output tok/s on a workload."""

    flags: tuple[tuple[str, object], ...]
    throughput: float

    def describe(self) -> str:
        """The flags beyond N-on, as on a command line (``N-on`` when there are none)."""
        words = [flag if value is True else f"{flag} {value}" for flag, value in self.flags]
        return " ".join(words) or "N-on"


@dataclass(frozen=True)
class Contribution:
    """One flag of the best, added to N-on after the ones before it: the figure with it, over
    the figure without it."""

    flag: str
    value: object
    gain: float
    measured: bool  # --mem-fraction-static: the KV pool's formula is calibration.md's


MEASURED_FLAGS = ("--mem-fraction-static",)


def _figure(flags: Mapping[str, object], workload: Workload) -> float:
    argv = _SEEDS.full_argv()
    for flag, value in flags.items():
        if value is None:
            continue
        argv += [flag] if value is True else [flag, str(value)]
    args = parse_server_args(argv)
    args.pop("time_scale")
    args.pop("emulator_seed")
    result = predict_throughput(
        args,
        _SEEDS.patched_gate,
        _SEEDS.forced_allreduce,
        workload.concurrency,
        workload.input_len,
        workload.output_len,
        num_requests=workload.num_requests,
    )
    return result if isinstance(result, float) else 0.0


def seeds_figure(workload: Workload) -> float:
    """N-on's noiseless output tok/s on ``workload``."""
    return _figure({}, workload)


def best_figure(
    workload: Workload, searched: Mapping[str, tuple[object, ...]] = SEARCHED
) -> Figure:
    """The best of every combination of ``searched`` on top of N-on (a failure scores 0)."""
    best = Figure((), seeds_figure(workload))
    names = list(searched)
    for values in itertools.product(*(searched[name] for name in names)):
        flags = dict(zip(names, values))
        if flags.get("--mem-fraction-static") == 0.92:
            flags.pop("--mem-fraction-static")  # N-on's own value
        figure = _figure(flags, workload)
        if figure > best.throughput:
            best = Figure(tuple((k, v) for k, v in flags.items() if v is not None), figure)
    return best


def contributions(best: Figure, workload: Workload) -> list[Contribution]:
    """The flags of ``best`` added to N-on one at a time, the measured ones first: what each
    adds. The gains multiply to ``best.throughput / seeds_figure(workload)``."""
    ordered = sorted(best.flags, key=lambda item: item[0] not in MEASURED_FLAGS)
    found, flags, before = [], {}, seeds_figure(workload)
    for flag, value in ordered:
        flags[flag] = value
        after = _figure(flags, workload)
        found.append(Contribution(flag, value, after / before, flag in MEASURED_FLAGS))
        before = after
    return found
