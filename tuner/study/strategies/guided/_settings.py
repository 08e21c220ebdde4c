"""The settings of the ``guided`` strategy: its proposers in order and their typed parameters.

The values are those chosen on the generated landscapes 0-49 and checked on held-out seeds
(``bench/search_efficiency.py``; docs/search-efficiency.md gives the figures and the commands).
Every setting is validated when made: an unknown proposer or a value out of range is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

__all__ = ["DEFAULT_PROPOSERS", "GuidedSettings", "ModelSettings", "ProposerKind", "SweepSettings"]


class ProposerKind(StrEnum):
    """One proposer of the composition (:mod:`tuner.study.strategies.guided`)."""

    RULES = "rules"  # the engine profile's tuning rules, then the built-in ones
    REPAIR = "repair"  # a rule's change that ran out of memory under load, with less memory
    CAPACITY_RETRY = (
        "capacity-retry"  # a capacity change that lost alone, from a best lifted since
    )
    CLIFF = "cliff"  # an up-to-failure parameter's bracket, bisected while memory binds
    SWEEP = "sweep"  # each parameter's values, one change of the best at a time
    MODEL = "model"  # the changes the additive model draws as gains
    COMBINE = "combine"  # the one-changes that paid, together
    SWEEP_AGAIN = "sweep-again"  # a second sweep from the best


# Best first; when none of them has a candidate left, the sampler (TPE) draws.
DEFAULT_PROPOSERS = (
    ProposerKind.RULES,
    ProposerKind.REPAIR,
    ProposerKind.CAPACITY_RETRY,
    ProposerKind.CLIFF,
    ProposerKind.SWEEP,
    ProposerKind.MODEL,
    ProposerKind.COMBINE,
    ProposerKind.SWEEP_AGAIN,
)


def _check(owner: object, name: str, kind: type, least: float, most: float | None = None) -> None:
    value: float = getattr(owner, name)
    if isinstance(value, bool) or not isinstance(value, (int, float) if kind is float else kind):
        raise ValueError(
            f"{type(owner).__name__}.{name}: {value!r} is not of type {kind.__name__}"
        )
    if value < least or (most is not None and value > most):
        bound = f"between {least:g} and {most:g}" if most is not None else f"at least {least:g}"
        raise ValueError(
            f"{type(owner).__name__}.{name}: {value!r} is out of range; use a value {bound}"
        )


@dataclass(frozen=True)
class SweepSettings:
    """The sweep's parameters (the rules read ``points`` too).

    ``points``: values tried over a numeric range. The sweep's order is the gain expected of
    each parameter per trial it takes: ``patch_effect`` for a parameter with a value someone
    wrote a source patch for, ``default_effect`` for one with no prior (a capacity flag of the
    engine profile has its own), divided by its count of values, at most ``trials_at_most`` (a
    hump's first three). ``defer_loss``: a parameter whose values measured so far all lost at
    least this share against the best waits for the end of the sweep (0: off). ``defer_won``: a
    parameter the best's line moved for a measured gain of at least this share waits with its
    other values for the end of the first sweep (0: off).
    """

    points: int = 5
    trials_at_most: int = 3
    patch_effect: float = 0.3
    default_effect: float = 0.05
    defer_loss: float = 0.1
    defer_won: float = 0.15

    def __post_init__(self) -> None:
        _check(self, "points", int, 2)
        _check(self, "trials_at_most", int, 1)
        for name in ("patch_effect", "default_effect", "defer_loss", "defer_won"):
            _check(self, name, float, 0.0, 1.0)


@dataclass(frozen=True)
class ModelSettings:
    """The additive model's parameters (:mod:`._model`).

    ``radius``: the trials fitted are those within this many changes of the best. ``draws``:
    posterior draws a proposal is chosen from; ``changes``: changes of the best one proposal
    makes at most. ``known_loss``: a change the model is sure (two standard deviations) loses
    at least this share is not run again from a new best (0: off).
    """

    radius: int = 4
    draws: int = 40
    changes: int = 3
    known_loss: float = 0.05

    def __post_init__(self) -> None:
        for name in ("radius", "draws", "changes"):
            _check(self, name, int, 1)
        _check(self, "known_loss", float, 0.0, 1.0)


@dataclass(frozen=True)
class GuidedSettings:
    """The guided strategy's composition and parameters.

    ``proposers``: asked in this order for each proposal (names or :class:`ProposerKind`).
    ``explore_every``: every k-th host-run trial is the sampler's (0: the sampler draws only
    when no proposer has a candidate left). ``retry_gain``: a change tried when the best
    measured was below 1/``retry_gain`` of today's best is stale (a backend that paid since
    moved the context on): a rule may try it again from the new best.
    """

    proposers: tuple[ProposerKind, ...] = DEFAULT_PROPOSERS
    explore_every: int = 0
    retry_gain: float = 1.15
    sweep: SweepSettings = SweepSettings()
    model: ModelSettings = ModelSettings()

    def __post_init__(self) -> None:
        known = ", ".join(kind.value for kind in ProposerKind)
        kinds = []
        for item in self.proposers:
            try:
                kinds.append(ProposerKind(item))
            except ValueError:
                raise ValueError(
                    f"GuidedSettings.proposers: {item!r} is not a proposer; use {known}"
                ) from None
        if len(set(kinds)) != len(kinds):
            raise ValueError(f"GuidedSettings.proposers: {', '.join(kinds)} names one twice")
        object.__setattr__(self, "proposers", tuple(kinds))
        _check(self, "explore_every", int, 0)
        _check(self, "retry_gain", float, 1.0)
        for name, kind in (("sweep", SweepSettings), ("model", ModelSettings)):
            if not isinstance(getattr(self, name), kind):
                raise ValueError(
                    f"GuidedSettings.{name}: {getattr(self, name)!r} is not a {kind.__name__}"
                )

    @classmethod
    def of(cls, values: dict[str, Any]) -> GuidedSettings:
        """Settings from names and values: a field of this class (``explore_every``,
        ``proposers`` as a comma-separated text or a sequence), or of its sweep or model as
        ``sweep.points``, ``model.radius``. An unknown name is refused."""
        top: dict[str, Any] = {}
        nested: dict[str, dict[str, Any]] = {"sweep": {}, "model": {}}
        for name, value in values.items():
            part, _, field = name.partition(".")
            if field and part in nested:
                nested[part][field] = value
            elif not field and name in {f.name for f in fields(cls)} - set(nested):
                top[name] = (
                    value.split(",") if name == "proposers" and isinstance(value, str) else value
                )
            else:
                raise ValueError(
                    f"{name!r} is not a guided setting; use one of {', '.join(_names(cls))}"
                )
        for part, kind in (("sweep", SweepSettings), ("model", ModelSettings)):
            unknown = set(nested[part]) - {f.name for f in fields(kind)}
            if unknown:
                raise ValueError(
                    f"'{part}.{sorted(unknown)[0]}' is not a guided setting; use one of "
                    f"{', '.join(_names(cls))}"
                )
        return cls(
            **top, sweep=SweepSettings(**nested["sweep"]), model=ModelSettings(**nested["model"])
        )


def _names(cls: type[GuidedSettings]) -> list[str]:
    return (
        [f.name for f in fields(cls) if f.name not in ("sweep", "model")]
        + [f"sweep.{f.name}" for f in fields(SweepSettings)]
        + [f"model.{f.name}" for f in fields(ModelSettings)]
    )
