"""Energy per token: each level's output tokens per joule (the report draws its Pareto front).

A level's ``gpu`` summary (:mod:`tuner.telemetry`) holds the power of the GPUs the server uses,
sampled while the level ran (``total_power_w``: the per-GPU mean times those GPUs). Output
tokens per second divided by watts is output tokens per joule; it is stored on the level as
``tokens_per_joule`` when the level is measured, so ``objective.metric: tokens_per_joule`` ranks
by it exactly as by throughput (the same clean-level rule, the same optional SLO). An emulated
study's power is the emulator's stand-in ``nvidia-smi`` (230-280 W per busy GPU, assumed: see
``tuner/emulator/README.md``), and its tokens per joule are emulated like its throughput.

Levels stored before ``total_power_w`` existed carry only the per-GPU mean: their tokens per
joule are known only when the caller states how many GPUs the server used (``gpus``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tuner.study.record._level import Level
from tuner.study.record._record import TrialRecord

__all__ = [
    "TOKENS_PER_JOULE",
    "EnergyPoint",
    "add_energy",
    "energy_points",
    "tokens_per_joule",
]

TOKENS_PER_JOULE = (
    "tokens_per_joule"  # the objective metric, and the key a measured level stores it under
)
# A level being measured is still the dict the runner stores (the typed one is read back: Level).
_GPU, _OUTPUT_THROUGHPUT = "gpu", "output_throughput"


def tokens_per_joule(level: Level, gpus: int | None = None) -> float | None:
    """Output tokens per joule of one stored level; None without power readings (a CPU host,
    or an older level whose GPU count ``gpus`` is not given)."""
    return _per_joule(level.gpu, level.output_throughput, gpus)


def add_energy(level: dict[str, Any]) -> float | None:
    """Store ``tokens_per_joule`` on a level just measured (when its power was sampled)."""
    value = _per_joule(level.get(_GPU), level.get(_OUTPUT_THROUGHPUT))
    if value is not None:
        level[TOKENS_PER_JOULE] = round(value, 4)
    return value


def _per_joule(
    gpu: Mapping[str, Any] | None, tokens: float | None, gpus: int | None = None
) -> float | None:
    gpu = gpu or {}
    power = gpu.get("total_power_w")
    if not power and gpus and gpu.get("mean_power_w"):
        power = float(gpu["mean_power_w"]) * gpus
    if not power or tokens is None:
        return None
    return float(tokens) / float(power)


@dataclass(frozen=True)
class EnergyPoint:
    """One clean level of one trial: throughput and energy per token."""

    trial: int
    concurrency: int
    output_throughput: float
    tokens_per_joule: float

    @property
    def joules_per_token(self) -> float:
        return 1.0 / self.tokens_per_joule


def energy_points(records: Iterable[TrialRecord], gpus: int | None = None) -> list[EnergyPoint]:
    """The clean levels of the stable COMPLETE trials (:class:`TrialRecord`) that have power."""
    points = []
    for record in records:
        if not record.stable or record.reused_from is not None:
            continue
        for level in record.levels:
            value = tokens_per_joule(level, gpus)
            if value is not None and level.stop_reason is None:
                points.append(
                    EnergyPoint(
                        record.number,
                        int(level.concurrency),
                        float(level.output_throughput),
                        value,
                    )
                )
    return points
