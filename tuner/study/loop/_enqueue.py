"""``tuner enqueue``: queue a configuration by hand; it runs before sampled ones.

The configuration is the baseline with the given parameters changed (``--set name=value``, values
read as YAML scalars: ``true``, ``null`` for unset, ``0.92``). It is validated against the search
space like the baseline, so a mistake costs no host time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import optuna
import yaml

from tuner.errors import ConfigError
from tuner.study.record import ENQUEUED

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = ["parse_assignments", "configuration_with", "enqueue_configuration"]


def parse_assignments(assignments: list[str]) -> dict[str, Any]:
    """``["name=value", ...]`` as a dict, values parsed as YAML scalars."""
    values: dict[str, Any] = {}
    for item in assignments:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise ConfigError(
                f"--set {item}: expected name=value (e.g. --set max_running_requests=1024)"
            )
        values[name.strip()] = yaml.safe_load(raw) if raw.strip() else None
    return values


def configuration_with(space: SearchSpace, overrides: dict[str, Any]) -> Any:
    """The baseline with ``overrides``; parameters made inactive by them are dropped."""
    unknown = sorted(set(overrides) - set(space.parameters))
    if unknown:
        raise ConfigError(
            f"--set {unknown[0]}: not a parameter of {space.path}; fix: use one of {', '.join(space.parameters)}"
        )
    return space.config({**dict(space.baseline), **overrides}, drop_inactive=True)


def enqueue_configuration(
    study: optuna.Study, space: SearchSpace, config: Mapping[str, Any]
) -> None:
    """Queue ``config`` in the study (it runs before sampled configurations)."""
    study.enqueue_trial(space.params_for_enqueue(config), user_attrs={ENQUEUED: True})
