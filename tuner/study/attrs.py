"""The names of what the tuner stores on trials and studies, and how it is written.

Optuna keeps user attributes as JSON; every value written here is JSON-able. Names are
self-explaining so that optuna-dashboard shows them as they are.
"""

from __future__ import annotations

import json
from typing import Any

import optuna

__all__ = [
    "LEVEL_FIGURES",
    "REUSABLE_FAILURES",
    "level_figures",
    "reusable_failure",
    "set",
    "set_level_figures",
]

# Failure classes that belong to the configuration (running it again would fail again). Others
# (interrupted, host-error, worker-died) belong to the run: such a configuration may run again.
REUSABLE_FAILURES = ("startup-crash", "oom-at-start", "unstable-at-", "hang", "wrong-output", "timeout")


def reusable_failure(reason: str | None) -> bool:
    """True when a FAIL with this reason would fail again: reuse it instead of rerunning."""
    return bool(reason) and any(reason.startswith(prefix) for prefix in REUSABLE_FAILURES)


def set(trial: optuna.Trial, key: str, value: Any) -> None:
    """Store ``value`` on the trial, made JSON-able (floats rounded, tuples as lists)."""
    trial.set_user_attr(key, json.loads(json.dumps(value, default=str)))


# Each level's headline figures are also stored flat (``tps@256``, ``p99_ttft_ms@256``, ...):
# optuna-dashboard cuts a JSON attribute such as ``levels`` at 1,024 characters, so that list
# alone is unreadable there; flat numbers are shown in full and sort the dashboard's trial table.
LEVEL_FIGURES = (
    ("tps", "output_throughput"),
    ("p99_ttft_ms", "p99_ttft_ms"),
    ("median_tpot_ms", "median_tpot_ms"),
)


def level_figures(level: dict[str, Any]) -> dict[str, Any]:
    """``{"tps@<c>": ..., "p99_ttft_ms@<c>": ..., "median_tpot_ms@<c>": ...}`` of one level."""
    return {f"{name}@{level['concurrency']}": level.get(key) for name, key in LEVEL_FIGURES}


def set_level_figures(trial: optuna.Trial, level: dict[str, Any]) -> None:
    """Store one level's headline figures as flat attributes (see :data:`LEVEL_FIGURES`)."""
    for key, value in level_figures(level).items():
        set(trial, key, value)
