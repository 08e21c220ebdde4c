"""``one-at-a-time``: change one parameter at a time from the best configuration so far.

Like SGLang's ``auto_benchmark`` tier 1 (one flag at a time, baseline first), extended into a
coordinate search: each proposal is the best configuration so far (the baseline at first) with one
parameter set to another of its values (:func:`sweep_values`); a configuration already tried is
skipped. When every single change of the best has been tried, the sampler (random) draws.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuner.errors import ConfigError
from tuner.study.strategies._base import Proposal
from tuner.study.strategies._values import sweep_values
from tuner.study.strategies.random_search import RandomStrategy
from tuner.study.record import StudyView

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = ["OneAtATimeStrategy", "single_changes"]


def single_changes(
    space: SearchSpace, start: dict[str, Any]
) -> list[tuple[str, Any, dict[str, Any]]]:
    """``(parameter, value, configuration)`` for each valid one-parameter change of ``start``.

    A parameter that ``start`` makes inactive is changed only through the one it depends on:
    the configuration then takes the defaults (or first values) of parameters it activates.
    """
    params = space.parameters
    fill = {name: p.default if p.has_default else sweep_values(p)[0] for name, p in params.items()}
    out: list[tuple[str, Any, dict[str, Any]]] = []
    seen = {_key(space, start)}
    for name, param in params.items():
        if name not in start:
            continue
        for value in sweep_values(param):
            if value == start[name] and type(value) is type(start[name]):
                continue
            try:
                config = space.config({**fill, **start, name: value}, drop_inactive=True)
            except ConfigError:
                continue
            key = config.key()
            if key not in seen:
                seen.add(key)
                out.append((name, value, dict(config)))
    return out


def _key(space: SearchSpace, config: dict[str, Any]) -> str:
    return space.config(config, drop_inactive=True).key()


class OneAtATimeStrategy(RandomStrategy):
    """One change of the best at a time; the random sampler when every change was tried."""

    name = "one-at-a-time"

    def propose(self, view: StudyView) -> Proposal | None:
        best = view.best() or view.baseline
        start = (
            dict(best.config) if best is not None and best.config else dict(self.space.baseline)
        )
        tried = {r.config_key for r in view.records if r.config_key is not None}
        tried |= {
            _key(self.space, r.config) for r in view.records if r.config and r.config_key is None
        }
        label = f"trial {best.number}" if best is not None else "the baseline"
        for name, value, config in single_changes(self.space, start):
            if self.space.config(config).key() not in tried:
                shown = "unset" if value is None else value
                return Proposal(config, f"one-at-a-time: {name}={shown} from {label}")
        return None
