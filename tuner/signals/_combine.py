"""One level's observations from every source, each stored with the source it came from.

The same figure (``running_req_max``, ``queue_req_max``, ``token_usage_max``, ...) can come from
the server log and from ``/metrics``. When both give it, **metrics win**: a gauge is read at the
client's steady pace through the whole level, the same way for every engine, while the log's
pace is the engine's (SGLang a line every 40 decode steps, vLLM every 10 s: none in a 5 s
level) and a quieter log level (SGLang's ``--log-level warning``) gives no lines at all. The
log fills what metrics do not give (``graph_max_bs``, and ``eager_fraction`` where the engine
counts no CUDA-graph passes); GPU telemetry gives the power figures. The source used for each
figure is recorded (``observation_sources``: name -> :class:`Source` value); a figure no
source gave is absent, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tuner.signals._series import Series, level_figures
from tuner.signals._source import Source

if TYPE_CHECKING:
    from tuner.signals._metrics import ServerSide

__all__ = ["PREFERRED", "LevelSignals", "TrialObservations", "level_observations", "observe_level"]

PREFERRED = (Source.METRICS, Source.SERVER_LOG)  # the first source that gives a figure is used


@dataclass(frozen=True)
class LevelSignals:
    """One level's figures (``values``) and where each was read (``sources``)."""

    values: dict[str, float]
    sources: dict[str, Source]


def level_observations(
    sources: Mapping[Source, Series | None],
    phase: str,
    concurrency: int,
    cap: int | None = None,
    gpu: Mapping[str, Any] | None = None,
) -> LevelSignals:
    """The figures of one level from each source (see the module docstring), merged."""
    values: dict[str, float] = {}
    used: dict[str, Source] = {}
    for source in reversed(PREFERRED):  # the preferred last: its figures replace the others'
        series = sources.get(source)
        if series is not None:
            for name, value in level_figures(series, phase, concurrency, cap).items():
                values[name], used[name] = value, source
    if gpu:
        if gpu.get("mean_power_w") is not None:
            values["gpu_power_w"], used["gpu_power_w"] = (
                float(gpu["mean_power_w"]),
                Source.TELEMETRY,
            )
        if gpu.get("power_limit_w"):
            values["gpu_power_limit_w"], used["gpu_power_limit_w"] = (
                float(gpu["power_limit_w"]),
                Source.TELEMETRY,
            )
    return LevelSignals(values, used)


def observe_level(
    session: ServerSide,
    concurrency: int,
    cap: int | None = None,
    gpu: Mapping[str, Any] | None = None,
) -> LevelSignals:
    """The level now ending on ``session`` (its ``phase``): its log observer (``observer``) and
    its metrics observer (``metrics``), either of which may be absent."""
    return level_observations(
        {
            Source.SERVER_LOG: getattr(session, "observer", None),
            Source.METRICS: getattr(session, "metrics", None),
        },
        session.phase,
        concurrency,
        cap,
        gpu,
    )


@dataclass
class TrialObservations:
    """A trial's observations as stored: ``name@<level>`` for each level, and unsuffixed the
    level the trial treats as its top so far; ``sources`` names each one's source."""

    values: dict[str, float] = field(default_factory=dict)
    sources: dict[str, Source] = field(default_factory=dict)

    def add(self, seen: LevelSignals, suffix: str, top: bool = True) -> None:
        """Add one level's figures under ``name<suffix>`` (the KV pool's size, the same at every
        level, only unsuffixed) and, when ``top``, also unsuffixed."""
        for name, value in seen.values.items():
            if name != "kv_tokens":
                self.values[f"{name}{suffix}"], self.sources[f"{name}{suffix}"] = (
                    value,
                    seen.sources[name],
                )
        if top:
            self.values.update(seen.values)
            self.sources.update(seen.sources)
