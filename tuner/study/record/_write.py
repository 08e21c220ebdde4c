"""How a value is written on a trial: JSON-able, scrubbed of the running launch's secrets; each
level's headline figures also stored flat."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import optuna

from tuner.scrub import Scrubber
from tuner.signals import Source, TrialObservations
from tuner.study.record._keys import OBSERVATION_SOURCES, OBSERVATIONS

__all__ = ["LEVEL_FIGURES", "level_figures", "scrubbing", "store", "store_level_figures"]


# The secrets of the launch being run: every value stored meanwhile is scrubbed of them.
_SCRUBBER: ContextVar[Scrubber | None] = ContextVar("tuner_attrs_scrubber", default=None)


@contextmanager
def scrubbing(scrubber: Scrubber) -> Iterator[None]:
    """Within this block, every :func:`store` replaces ``scrubber``'s secret values by ``***``
    (log excerpts, failure details, command lines: whatever a trial stores while it runs)."""
    token = _SCRUBBER.set(scrubber)
    try:
        yield
    finally:
        _SCRUBBER.reset(token)


def store(trial: optuna.Trial, key: str, value: Any) -> None:
    """Store ``value`` on the trial, made JSON-able (floats rounded, tuples as lists), scrubbed
    of the running launch's secrets (:func:`scrubbing`)."""
    stored = json.loads(json.dumps(value, default=str))
    scrubber = _SCRUBBER.get()
    trial.set_user_attr(key, scrubber.value(stored) if scrubber else stored)


# Each level's headline figures are also stored flat (``tps@256``, ``p99_ttft_ms@256``, ...):
# optuna-dashboard cuts a JSON attribute such as ``levels`` at 1,024 characters, so that list
# alone is unreadable there; flat numbers are shown in full and sort the dashboard's trial table.
LEVEL_FIGURES = (
    ("tps", "output_throughput"),
    ("p99_ttft_ms", "p99_ttft_ms"),
    ("median_tpot_ms", "median_tpot_ms"),
    (
        "tokens_per_joule",
        "tokens_per_joule",
    ),  # output tokens per joule (tuner.study.record._energy)
)


def level_figures(level: dict[str, Any]) -> dict[str, Any]:
    """``{"tps@<c>": ..., "p99_ttft_ms@<c>": ..., "median_tpot_ms@<c>": ...}`` of one level."""
    return {f"{name}@{level['concurrency']}": level.get(key) for name, key in LEVEL_FIGURES}


def store_level_figures(trial: optuna.Trial, level: dict[str, Any]) -> None:
    """Store one level's headline figures as flat attributes (see :data:`LEVEL_FIGURES`)."""
    for key, value in level_figures(level).items():
        store(trial, key, value)


def store_observations(trial: optuna.Trial, observations: TrialObservations) -> None:
    """Store a trial's observations and, beside them, the source each was read from."""
    store(trial, OBSERVATIONS, observations.values)
    store(
        trial,
        OBSERVATION_SOURCES,
        {name: source.value for name, source in observations.sources.items()},
    )


def observation_sources(user_attrs: dict[str, Any]) -> dict[str, Source]:
    """The stored ``observation_sources`` as :class:`Source` values (a trial stored before
    sources were has none: its observations came from the server log and telemetry)."""
    known = {source.value: source for source in Source}
    stored = user_attrs.get(OBSERVATION_SOURCES) or {}
    return {name: known[value] for name, value in stored.items() if value in known}
