"""One measured level as stored on a trial, read back typed: :class:`Level`.

The trial runner stores each level as :meth:`LevelMetrics.to_dict` plus what the study adds to
it: the GPU telemetry summary of the level (``gpu``), its output tokens per joule, and on a
goodput study whether the level met the SLO (``meets_slo``, ``slo_miss``). The stored format is
unchanged; this module is the one reader of those keys, so the rest of the tuner reads fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from tuner.loadgen import LevelMetrics

__all__ = ["Level", "read_levels", "clean_levels"]

# The keys the study adds to a level beside the client's figures (``LevelMetrics``).
_GPU = "gpu"
_TOKENS_PER_JOULE = "tokens_per_joule"
_MEETS_SLO = "meets_slo"
_SLO_MISS = "slo_miss"
_EXTRAS = (_GPU, _TOKENS_PER_JOULE, _MEETS_SLO, _SLO_MISS)
_METRIC_FIELDS = frozenset(f.name for f in fields(LevelMetrics))


@dataclass(frozen=True)
class Level(LevelMetrics):
    """A level of a trial: the client's :class:`LevelMetrics` and what the study stored with it.

    ``gpu``: the GPU telemetry summary over the level (:meth:`tuner.telemetry.GpuSummary.to_dict`;
    None without ``nvidia-smi``); ``tokens_per_joule``: output tokens per joule (None without
    power readings); ``meets_slo``/``slo_miss``: a goodput level's verdict (None elsewhere).
    """

    gpu: dict[str, Any] | None = None
    tokens_per_joule: float | None = None
    meets_slo: bool | None = None
    slo_miss: str | None = None

    def figure(self, metric: str) -> float | None:
        """The level's figure named ``metric`` (``output_throughput``, ``tokens_per_joule``, ...);
        None when the level has none (``goodput``: a study-level figure, not a level's)."""
        if metric in _METRIC_FIELDS or metric in _EXTRAS:
            return getattr(self, metric)
        return None

    def gpu_figure(self, name: str) -> float | None:
        """One figure of the level's GPU summary (``mean_power_w``, ``power_limit_w``, ...)."""
        return (self.gpu or {}).get(name)

    def to_dict(self) -> dict[str, Any]:
        """The level as it is stored (the study's additions only when it stored them)."""
        document = LevelMetrics.to_dict(self)
        for name in _EXTRAS:
            document.pop(name, None)
        if self.gpu is not None:
            document[_GPU] = self.gpu
        if self.tokens_per_joule is not None:
            document[_TOKENS_PER_JOULE] = self.tokens_per_joule
        if self.meets_slo is not None:
            document[_MEETS_SLO], document[_SLO_MISS] = self.meets_slo, self.slo_miss
        return document

    @classmethod
    def from_dict(cls, document: dict[str, Any]) -> Level:
        """A stored level read back (unknown keys ignored).

        Raises:
            ValueError: a figure the client always measures is missing.
        """
        metrics = LevelMetrics.from_dict(document)
        return cls(
            **{f.name: getattr(metrics, f.name) for f in fields(LevelMetrics)},
            gpu=document.get(_GPU) or None,
            tokens_per_joule=document.get(_TOKENS_PER_JOULE),
            meets_slo=document.get(_MEETS_SLO),
            slo_miss=document.get(_SLO_MISS),
        )


def read_levels(stored: Iterable[Mapping[str, Any]] | None) -> tuple[Level, ...]:
    """The stored levels read back as :class:`Level` (a level stored without the client's
    figures is left out)."""
    out = []
    for level in stored or ():
        try:
            out.append(Level.from_dict(dict(level)))
        except (TypeError, ValueError):
            continue
    return tuple(out)


def clean_levels(
    levels: Sequence[Level], metric: str, max_failed_fraction: float
) -> dict[int, float]:
    """``{concurrency: metric}`` of the levels that ran to their end with few failed requests.

    A goodput study's levels are request rates at one concurrency and carry no ``goodput`` figure:
    there the highest rate that met the SLO stands for them (in req/s, as the trial's value)."""
    values: dict[int, float] = {}
    for level in levels:
        total = level.completed + level.failed
        if level.stop_reason is None and level.failed <= max_failed_fraction * max(1, total):
            figure = level.figure(metric)
            if figure is None:  # a goodput rate level
                if not level.meets_slo or level.request_rate is None:
                    continue
                figure = level.request_rate
            concurrency = int(level.concurrency)
            values[concurrency] = max(float(figure), values.get(concurrency, float(figure)))
    return values
