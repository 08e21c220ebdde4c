"""What every proposer of the ``guided`` strategy reads: a trial's top-level observations, its
KV pool, the grid of a numeric parameter, and how two configurations differ."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.errors import ConfigError
from tuner.study.strategies._values import sweep_values
from tuner.study.record import TrialRecord

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = [
    "MISSING",
    "FULL_POOL",
    "top_level_observations",
    "running_batch",
    "token_usage",
    "pool_full",
    "room_to_spare",
    "distance",
    "changed",
    "hashable",
    "grid",
    "doublings",
    "natural",
    "flags_of",
    "engine_profile",
]

MISSING = object()  # a parameter a configuration does not set
FULL_POOL = 0.9  # token usage at which a KV pool counts as full: memory binds


def top_level_observations(observations: dict[str, Any]) -> dict[str, Any]:
    """The observations of the highest level measured (``name@<c>``), over the unsuffixed ones
    (the KV pool at start, or a host that reports one set per trial); their sources alike."""
    levels = [int(k.rpartition("@")[2]) for k in observations if k.rpartition("@")[2].isdigit()]
    if not levels:
        return dict(observations)
    top = f"@{max(levels)}"
    return {
        **observations,
        **{k.removesuffix(top): v for k, v in observations.items() if k.endswith(top)},
    }


def running_batch(record: TrialRecord, cap: str | None = None) -> float | None:
    """The most requests the trial's server ran at once, at its top level: as its log or
    ``/metrics`` said; where neither says, and ``cap`` names the running-request cap's
    parameter, the most the client's levels allow (the top clean level's concurrency, at most
    the cap the trial set); None when nothing says."""
    logged = top_level_observations(record.observations).get("running_req_max")
    if logged is not None or cap is None or not record.clean:
        return logged
    limit = record.config.get(cap)
    top = max(record.clean)
    return float(top if limit is None else min(top, limit))


def token_usage(record: TrialRecord) -> float | None:
    """The KV pool's highest use at the trial's top level (None: the log does not give it)."""
    return top_level_observations(record.observations).get("token_usage_max")


def pool_full(record: TrialRecord) -> bool:
    """Whether the trial's KV pool was full at its top level (token usage >= 90%): memory binds."""
    return (token_usage(record) or 0.0) >= FULL_POOL


def room_to_spare(record: TrialRecord) -> bool:
    """Whether the trial's log says its KV pool had room at its top level (token usage < 90%);
    False when it says nothing of it (vLLM logs its usage in percent, which is not read)."""
    usage = token_usage(record)
    return usage is not None and usage < FULL_POOL


def distance(a: dict[str, Any], b: dict[str, Any]) -> int:
    """How many parameters two configurations set differently (set in one only counts)."""
    return sum(a.get(k, MISSING) != b.get(k, MISSING) for k in a.keys() | b.keys())


def changed(a: dict[str, Any], b: dict[str, Any]) -> set[str]:
    """The parameters set in both configurations with different values."""
    return {k for k in a.keys() & b.keys() if a[k] != b[k]}


def hashable(value: Any) -> Any:
    """A configuration value usable in a set (a list as a tuple)."""
    return tuple(value) if isinstance(value, list) else value


def grid(param: Any) -> list[Any]:
    """Every value of a numeric parameter on its grid (or its sweep values when unbounded)."""
    step = getattr(param, "step", None)
    if hasattr(param, "low") and step:
        count = round((param.high - param.low) / step)
        values = []
        for k in range(count + 1):
            try:
                values.append(param.check_value(param.low + k * step))
            except Exception:  # a float just outside the grid by rounding
                continue
        return values
    numbers = param.numeric_options() if hasattr(param, "numeric_options") else None
    if numbers and not hasattr(param, "low"):
        return sorted(numbers)
    if hasattr(param, "low") and param.kind == "int" and param.high - param.low <= 4096:
        return list(range(param.low, param.high + 1))
    return sorted(v for v in sweep_values(param, 9) if v is not None)


def doublings(param: Any) -> list[Any]:
    """An integer parameter's values from its low end, doubling (64, 128, ..., 2048); its grid
    when it has no positive integer low end."""
    low, high = getattr(param, "low", None), getattr(param, "high", None)
    if param.kind != "int" or not low or low <= 0:
        return grid(param)
    values = []
    while low <= high:
        values.append(low)
        low *= 2
    return values


def natural(param: Any) -> Any:
    """The value a parameter takes when a change activates it: its default, else unset, else
    its first value."""
    if param.has_default:
        return param.default
    if getattr(param, "unset", False):
        return None
    options = sweep_values(param)
    return options[0] if options else None


def flags_of(param: Any) -> list[str]:
    """The command-line flags a parameter renders (none for a source patch)."""
    try:
        return list(param.flags())
    except Exception:  # kinds without a flag (a patch)
        return []


def engine_profile(space: SearchSpace) -> Any:
    """The space's engine profile (None when it names no known engine)."""
    from tuner.engines import load_profile

    try:
        return load_profile(space.engine)
    except ConfigError:
        return None
