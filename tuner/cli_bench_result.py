"""What ``tuner bench`` keeps and shows beside its table: the result file and a level's progress.

``--save-result FILE`` writes one JSON document with what produced the figures (date, URL, model,
API, lengths, dataset, seed, tuner version) and every level. Its keys are the tuner's own
(:meth:`LevelMetrics.to_dict`) plus the names ``vllm bench serve`` gives the same figures
(:data:`VLLM_KEYS`: ``max_concurrency``, ``total_token_throughput``, ``model_id``, ...), so a
script written for either reads it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Self

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tuner import __version__
from tuner.errors import ConfigError
from tuner.loadgen import LevelMetrics, LevelSpec

__all__ = [
    "LATENCY_METRICS",
    "VLLM_KEYS",
    "LevelProgress",
    "RunFacts",
    "parse_metric_percentiles",
    "parse_percentile_metrics",
    "result_document",
    "save_result",
]

# ``--percentile-metrics`` names (vllm bench serve's) -> the tuner's latency kinds.
LATENCY_METRICS = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2e"}

# A level's figure under the name vllm bench serve gives it -> the tuner's key.
VLLM_KEYS = {
    "max_concurrency": "concurrency",
    "num_prompts": "num_requests",
    "duration": "duration_s",
    "total_input_tokens": "input_tokens",
    "total_output_tokens": "output_tokens",
    "total_token_throughput": "total_throughput",
}


def parse_percentile_metrics(text: str) -> tuple[str, ...]:
    """``"ttft,tpot,itl"`` -> the tuner's kinds; an unknown name is a ConfigError."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in LATENCY_METRICS]
    if unknown or not names:
        raise ConfigError(
            f"--percentile-metrics {text}: {', '.join(unknown) or 'empty'} unknown; "
            f"fix: use a comma-separated list of {', '.join(LATENCY_METRICS)}"
        )
    return tuple(LATENCY_METRICS[name] for name in names)


def parse_metric_percentiles(text: str) -> tuple[float, ...]:
    """``"50,90,99"`` -> ``(50.0, 90.0, 99.0)``; anything outside 0-100 is a ConfigError."""
    try:
        values = tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        values = ()
    if not values or not all(0.0 <= value <= 100.0 for value in values):
        raise ConfigError(
            f"--metric-percentiles {text}: not a list of percentiles; "
            "fix: use numbers from 0 to 100, e.g. 50,90,99"
        )
    return values


@dataclass(frozen=True)
class RunFacts:
    """What produced a bench run's figures, as the result file records them."""

    url: str
    api: str
    model: str | None
    input_len: int
    output_len: int
    dataset: str | None
    seed: int
    request_rate: float | None
    arrival: str
    emulated: bool
    time_scale: float


def _level(level: LevelMetrics, kinds: tuple[str, ...]) -> dict[str, Any]:
    document = level.to_dict()
    percentiles = document.pop("percentiles", {})
    document.update(
        {key: value for key, value in percentiles.items() if key.split("_")[1] in kinds}
    )
    document.update({vllm: document[ours] for vllm, ours in VLLM_KEYS.items()})
    # vllm bench serve names the end-to-end latency e2el (``p99_e2el_ms``)
    document.update(
        {
            key.replace("_e2e_ms", "_e2el_ms"): value
            for key, value in list(document.items())
            if key.endswith("_e2e_ms")
        }
    )
    return document


def result_document(
    facts: RunFacts, levels: list[LevelMetrics], kinds: tuple[str, ...], error: str | None
) -> dict[str, Any]:
    """The JSON document of a run: its facts and every level (``--json`` and ``--save-result``)."""
    document: dict[str, Any] = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"),  # vllm bench serve's date format
        "tuner_version": __version__,
        "url": facts.url,
        "backend": facts.api,
        "api": facts.api,
        "model_id": facts.model,
        "input_len": facts.input_len,
        "output_len": facts.output_len,
        "dataset_path": facts.dataset,
        "seed": facts.seed,
        "request_rate": facts.request_rate,
        "arrival": facts.arrival,
        "emulated": facts.emulated,
        "time_scale": facts.time_scale,
        "levels": [_level(level, kinds) for level in levels],
    }
    if error:
        document["error"] = error
    return document


def save_result(path: Path, document: dict[str, Any]) -> None:
    """Write the document to ``path`` (its folder made when missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


class LevelProgress:
    """A progress bar per level on stderr: requests done of the level's, output tokens/s so far.

    Fed by :func:`tuner.loadgen.run_levels`'s ``on_progress(spec, log)`` about every 100 ms;
    on a terminal only (a log file gets the one line per level the command prints anyway).
    """

    def __init__(self, console: Console, enabled: bool, rate: Any) -> None:
        self._rate = rate  # server tokens/s -> host tokens/s (the emulator's time scale)
        self._bar = Progress(
            TextColumn("concurrency {task.fields[level]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[speed]} out tok/s"),
            TimeElapsedColumn(),
            console=console,
            disable=not enabled,
            transient=False,
        )
        self._tasks: dict[int, Any] = {}
        self._started: dict[int, float] = {}
        self._current: int | None = None

    def __enter__(self) -> Self:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def update(self, spec: LevelSpec, log: Any) -> None:
        key = self._current = spec.first_request
        if key not in self._tasks:
            self._tasks[key] = self._bar.add_task(
                "", total=log.size, level=spec.concurrency, speed="-"
            )
            self._started[key] = time.perf_counter()
        done = log.size - log.status.count(0)
        seconds = max(time.perf_counter() - self._started[key], 1e-9)
        speed = self._rate(sum(log.output_tokens) / seconds)
        self._bar.update(self._tasks[key], completed=done, speed=f"{speed:,.0f}")

    def level_done(self, level: LevelMetrics) -> None:
        """Show the level's end: its requests finished and its measured output tokens/s."""
        if self._current is not None:
            self._bar.update(
                self._tasks[self._current],
                completed=level.completed + level.failed,
                speed=f"{level.output_throughput:,.0f}",
            )
            self._current = None
