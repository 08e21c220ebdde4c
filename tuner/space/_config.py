"""One server configuration: the values of the active parameters, frozen and hashable.

Two configurations are the same exactly when their :meth:`Config.key` (canonical JSON) is equal,
which is what the study uses to avoid running a configuration twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tuner.space._conditions import Condition

__all__ = ["Config", "build_config"]


class Config(Mapping[str, Any]):
    """The values of the active parameters (``None`` = unset: the flag is left out).

    Inactive parameters are absent. Iteration follows the search space's declaration order.
    """

    __slots__ = ("_values", "_key")
    _values: dict[str, Any]
    _key: str

    def __init__(self, values: Mapping[str, Any] | None = None) -> None:
        object.__setattr__(self, "_values", dict(values or {}))
        object.__setattr__(
            self, "_key", json.dumps(self._values, sort_keys=True, separators=(",", ":"))
        )

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Config is frozen")

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Config):
            return self._key == other._key
        if isinstance(other, Mapping):
            return self._key == Config(other)._key
        return NotImplemented

    def __reduce__(self) -> tuple[type[Config], tuple[dict[str, Any]]]:
        return (Config, (self._values,))

    def __repr__(self) -> str:
        return f"Config({self._values!r})"

    def key(self) -> str:
        """Canonical JSON (sorted keys, no spaces): equal keys mean the same configuration."""
        return self._key

    def to_dict(self) -> dict[str, Any]:
        """A plain ``dict`` copy (JSON-serialisable)."""
        return dict(self._values)

    def describe(self) -> str:
        """``name=value`` pairs in declaration order, ``unset`` for None (for progress lines)."""
        return ", ".join(f"{k}={'unset' if v is None else v}" for k, v in self._values.items())


def build_config(
    order: list[str],
    conditions: Mapping[str, Condition],
    value_of: Callable[[str], Any],
) -> Config:
    """Walk the parameters in declaration order and collect the values of the active ones.

    Args:
        order: parameter names, as declared.
        conditions: each parameter's ``when:``; it sees the values chosen before it.
        value_of: gives the value of an active parameter (sampled, decoded or looked up).
    """
    values: dict[str, Any] = {}
    for name in order:
        if conditions[name].holds(values):
            values[name] = value_of(name)
    return Config(values)
