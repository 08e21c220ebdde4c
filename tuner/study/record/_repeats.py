"""A trial's re-measured runs, stored so that concurrent writers never lose one.

Each re-run (:mod:`tuner.study.loop._confirm`, :mod:`tuner.recheck`) is one study attribute of
its own, ``repeat:<trial>:<ns>:<token>`` (:func:`store_run`): one write of a key that no other
writer touches, so two workers re-measuring at once (two hosts on one study, ``--n-jobs``) both
keep their runs, on every storage. A read-modify-write of one shared dict lost the slower
writer's run.

:func:`repeats_of` gives the runs in the one form every reader takes, by trial number::

    {"7": {"values": [4612.0, 4540.3], "failed": [], "host_seconds": [912.0],
           "levels": [[...]]}}

``values``: the trial's own value first, then each completed re-run's; ``levels``: each completed
re-run's stored levels, in the order of its value. A study written before runs had keys of their
own, or one seeded by ``--from-study``, keeps that form whole under ``repeats``
(:data:`tuner.study.record.REPEATS`); the runs stored under their own keys follow it, in the
order they ran.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from tuner.study.record._keys import REPEATS

__all__ = ["REPEAT_RUN_PREFIX", "repeats_of", "store_run"]

REPEAT_RUN_PREFIX = "repeat:"


class _Attributed(Protocol):
    """A study's attribute writer (``optuna.Study``)."""

    def set_user_attr(self, key: str, value: Any) -> None: ...


def store_run(
    study: _Attributed,
    number: int,
    first: float | None,
    value: float | None,
    failure: str | None,
    host_seconds: float | None,
    levels: list[dict[str, Any]] | None = None,
) -> None:
    """One re-run of trial ``number`` (its own value ``first``): ``value`` and its ``levels``, or
    the ``failure`` that ended it, and the host time it took."""
    key = f"{REPEAT_RUN_PREFIX}{number}:{time.time_ns():020d}:{uuid.uuid4().hex[:8]}"
    study.set_user_attr(
        key,
        {
            "first": first,
            "value": value,
            "failure": failure if value is None else None,
            "host_seconds": host_seconds,
            "levels": list(levels or []) if value is not None else [],
        },
    )


def repeats_of(study_attrs: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every re-measured trial's runs, by trial number (the module's form)."""
    merged = {
        str(number): {
            key: list(part) if isinstance(part, list) else part for key, part in runs.items()
        }
        for number, runs in (study_attrs.get(REPEATS) or {}).items()
    }
    # each run's key holds its trial and its time: in key order, each trial's runs as they ran
    for key in sorted(k for k in study_attrs if k.startswith(REPEAT_RUN_PREFIX)):
        run = study_attrs[key]
        if not isinstance(run, Mapping):
            continue
        number = key[len(REPEAT_RUN_PREFIX) :].split(":", 1)[0]
        first = run.get("first")
        mine = merged.setdefault(
            number,
            {"values": [first] if first is not None else [], "failed": [], "host_seconds": []},
        )
        if run.get("value") is not None:
            # levels stay beside values only where every earlier re-run kept its levels too (a
            # study written before re-runs kept them reads each run's value instead)
            if "levels" in mine or len(mine["values"]) <= 1:
                mine.setdefault("levels", []).append(list(run.get("levels") or []))
            mine["values"].append(run["value"])
        else:
            mine["failed"].append(run.get("failure"))
        mine.setdefault("host_seconds", []).append(run.get("host_seconds"))
    return merged
