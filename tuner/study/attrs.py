"""The one schema of what the tuner stores on trials, how it is written, and how it is read.

Optuna keeps user attributes as JSON; every value written here is JSON-able. Names are
self-explaining so that optuna-dashboard shows them as they are. Every other module uses the
names below (never the strings) and reads a trial's outcome with :func:`outcome_of`: what a
PRUNED or FAIL trial means is a typed :class:`Outcome`, not a string compared in many places.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from enum import Enum
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from tuner.scrub import Scrubber

__all__ = [
    "Outcome",
    "outcome_of",
    "LEVEL_FIGURES",
    "REUSABLE_FAILURES",
    "level_figures",
    "reusable_failure",
    "scrubbing",
    "set",
    "set_level_figures",
    "set_outcome",
    "CONFIG", "CONFIG_KEY", "IS_BASELINE", "ENQUEUED", "RETRY_OF", "REUSED_FROM", "CHOSEN_BY", "MOVE",
    "LEVELS", "TELEMETRY", "OBSERVATIONS", "STABLE", "FAILURE_REASON", "FAILURE_DETAIL",
    "PRUNED_REASON", "PRUNED_BY", "PRUNED_CLASSES", "WORKER", "WARM_START_FROM", "REUSED_ATTRS",
    "KEPT_ON_RETRY",
]

# -- attribute names (user attributes of a trial) ------------------------------------------------
CONFIG = "config"  # dict: the configuration, parameter name -> value (None = unset)
CONFIG_KEY = "config_key"  # str: the configuration's identity, for reuse
IS_BASELINE = "is_baseline"  # bool: the baseline trial (set when it is queued)
ENQUEUED = "enqueued"  # bool: queued by hand, by warm start or by a strategy's proposal
RETRY_OF = "retry_of"  # int: the trial whose worker died; this one runs its configuration again
REUSED_FROM = "reused_from"  # int: identical to this earlier trial, whose result it copies
CHOSEN_BY = "chosen_by"  # str: why this configuration was chosen ("sampler: tpe", "rule: ...")
MOVE = "move"  # dict: the strategy's move that chose it, as data (strategies._moves.Move.to_dict)
LEVELS = "levels"  # list of dicts: each level's metrics (LevelMetrics.to_dict)
TELEMETRY = "telemetry"  # dict: concurrency -> GPU telemetry summary
OBSERVATIONS = "observations"  # dict: name -> number, what the server log and telemetry said
STABLE = "stable"  # bool: every level ran clean
FAILURE_REASON = "failure_reason"  # str: the FAIL's class ("oom-at-start", "unstable-at-1024")
FAILURE_DETAIL = "failure_detail"  # str: one line on the failure
PRUNED_REASON = "pruned_reason"  # str: why a PRUNED trial was stopped or skipped
PRUNED_BY = "pruned_by"  # str: a PRUNED's class, one of PRUNED_CLASSES (see Outcome)
WORKER = "worker"  # str: host:pid of the tuner that ran it
WARM_START_FROM = "warm_start_from"  # str: "<study>#<trial number>" a warm start queued it from

# What a trial that reuses an earlier identical one copies from it.
REUSED_ATTRS = (LEVELS, FAILURE_REASON, FAILURE_DETAIL, PRUNED_REASON, PRUNED_BY, STABLE, OBSERVATIONS)
# What a configuration queued again (its worker died) keeps of the first attempt.
KEPT_ON_RETRY = (IS_BASELINE, ENQUEUED, CHOSEN_BY, MOVE, WARM_START_FROM)


class Outcome(str, Enum):
    """What became of a trial, beyond Optuna's state.

    PRUNED has three meanings (stopped below the baseline, skipped by a constraint, skipped by
    the feasibility gate) and FAIL two (the configuration is to blame, or the run was: Ctrl-C,
    host trouble, a dead worker); a trial that copied an earlier identical one is REUSED.
    """

    COMPLETE = "complete"
    BELOW_BASELINE = "below-baseline"  # PRUNED: ran, stayed below the baseline
    CONSTRAINT = "constraint"  # PRUNED: skipped by a constraint, not run
    GATED = "gated"  # PRUNED: skipped by the feasibility gate, not run
    REUSED = "reused"  # copied the result of an earlier identical configuration
    FAILED = "failed"  # FAIL by its configuration (would fail again)
    RUN_FAILED = "run-failed"  # FAIL by the run (interrupted, host-error, worker-died)
    RUNNING = "running"
    WAITING = "waiting"

    @property
    def ran(self) -> bool:
        """Whether the configuration ran on the host in this trial (and so says something)."""
        return self in (Outcome.COMPLETE, Outcome.BELOW_BASELINE, Outcome.FAILED)

    @property
    def pruned_by(self) -> str | None:
        """The stored ``pruned_by`` of a PRUNED outcome."""
        return _PRUNED_BY.get(self)


# The stored ``pruned_by`` values (kept as they were, so older studies read the same).
_PRUNED_BY = {Outcome.BELOW_BASELINE: "baseline", Outcome.CONSTRAINT: "constraint", Outcome.GATED: "feasibility"}
_BY_PRUNED = {text: outcome for outcome, text in _PRUNED_BY.items()}
PRUNED_CLASSES = tuple(_BY_PRUNED)

# Failure classes that belong to the configuration (running it again would fail again). Others
# (interrupted, host-error, worker-died) belong to the run: such a configuration may run again.
REUSABLE_FAILURES = ("startup-crash", "oom-at-start", "unstable-at-", "hang", "wrong-output", "timeout")


def reusable_failure(reason: str | None) -> bool:
    """True when a FAIL with this reason would fail again: reuse it instead of rerunning."""
    return bool(reason) and any(reason.startswith(prefix) for prefix in REUSABLE_FAILURES)


def outcome_of(trial: FrozenTrial, *, follow_reuse: bool = False) -> Outcome:
    """The trial's :class:`Outcome` (the one place that reads the stored strings).

    ``follow_reuse``: a reused trial gets the outcome it copied instead of REUSED.
    """
    ua = trial.user_attrs
    if ua.get(REUSED_FROM) is not None and not follow_reuse and trial.state.is_finished():
        return Outcome.REUSED
    if trial.state == TrialState.COMPLETE:
        return Outcome.COMPLETE
    if trial.state == TrialState.PRUNED:
        return _BY_PRUNED.get(str(ua.get(PRUNED_BY) or "baseline"), Outcome.BELOW_BASELINE)
    if trial.state == TrialState.FAIL:
        return Outcome.FAILED if reusable_failure(ua.get(FAILURE_REASON)) else Outcome.RUN_FAILED
    if trial.state == TrialState.RUNNING:
        return Outcome.RUNNING
    return Outcome.WAITING


# The secrets of the launch being run: every value stored meanwhile is scrubbed of them.
_SCRUBBER: ContextVar[Scrubber | None] = ContextVar("tuner_attrs_scrubber", default=None)


@contextmanager
def scrubbing(scrubber: Scrubber) -> Iterator[None]:
    """Within this block, every :func:`set` replaces ``scrubber``'s secret values by ``***``
    (log excerpts, failure details, command lines: whatever a trial stores while it runs)."""
    token = _SCRUBBER.set(scrubber)
    try:
        yield
    finally:
        _SCRUBBER.reset(token)


def set(trial: optuna.Trial, key: str, value: Any) -> None:
    """Store ``value`` on the trial, made JSON-able (floats rounded, tuples as lists), scrubbed
    of the running launch's secrets (:func:`scrubbing`)."""
    stored = json.loads(json.dumps(value, default=str))
    scrubber = _SCRUBBER.get()
    trial.set_user_attr(key, scrubber.value(stored) if scrubber else stored)


def set_outcome(trial: optuna.Trial, outcome: Outcome, reason: str) -> None:
    """Store a PRUNED outcome's class and reason (the caller then tells Optuna PRUNED)."""
    if outcome.pruned_by is None:
        raise ValueError(f"{outcome} is not a PRUNED outcome")
    set(trial, PRUNED_REASON, reason)
    set(trial, PRUNED_BY, outcome.pruned_by)


# Each level's headline figures are also stored flat (``tps@256``, ``p99_ttft_ms@256``, ...):
# optuna-dashboard cuts a JSON attribute such as ``levels`` at 1,024 characters, so that list
# alone is unreadable there; flat numbers are shown in full and sort the dashboard's trial table.
LEVEL_FIGURES = (
    ("tps", "output_throughput"),
    ("p99_ttft_ms", "p99_ttft_ms"),
    ("median_tpot_ms", "median_tpot_ms"),
    ("tokens_per_joule", "tokens_per_joule"),  # output tokens per joule (tuner.study.energy)
)


def level_figures(level: dict[str, Any]) -> dict[str, Any]:
    """``{"tps@<c>": ..., "p99_ttft_ms@<c>": ..., "median_tpot_ms@<c>": ...}`` of one level."""
    return {f"{name}@{level['concurrency']}": level.get(key) for name, key in LEVEL_FIGURES}


def set_level_figures(trial: optuna.Trial, level: dict[str, Any]) -> None:
    """Store one level's headline figures as flat attributes (see :data:`LEVEL_FIGURES`)."""
    for key, value in level_figures(level).items():
        set(trial, key, value)

