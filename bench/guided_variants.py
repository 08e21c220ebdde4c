"""Variants of the ``guided`` strategy that were measured and not adopted, for the benchmark.

``bench/search_efficiency.py --guided NAME=VALUE`` takes a guided setting
(:meth:`tuner.study.strategies.guided.GuidedSettings.of`: ``explore_every=4``,
``sweep.points=3``, ``proposers=rules,repair,cliff,sweep,combine``) or one of the variants
below, each an alternative proposer in place of the default's:

- ``cliff=said-full``: the memory cliff is bisected only while the log or ``/metrics`` says the
  KV pool is full (the default also probes it where nothing reports the pool's use);
- ``sweep_order=effect``: the sweep by the gain expected of each parameter, not per trial spent;
- ``sweep_order=space``: the sweep in the order the space lists the parameters.

docs/search-efficiency.md gives what each measured against the default.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tuner.study.record import TrialRecord
from tuner.study.strategies.guided import (
    CliffProposer,
    GuidedSettings,
    GuidedStrategy,
    Plan,
    ProposerKind,
    Proposer,
    SweepProposer,
    SweptParameter,
    expected_effect,
    pool_full,
)

__all__ = ["VARIANTS", "guided_strategy", "read_options"]


class SaidFullCliff(CliffProposer):
    """The cliff only while something says the KV pool is full."""

    def memory_binds(self, inc: TrialRecord) -> bool:
        return pool_full(inc)


class EffectOrderSweep(SweepProposer):
    """The largest expected gain first, then the fewest values (not divided by trials spent)."""

    def order(self, swept: list[SweptParameter], inc: TrialRecord, full: bool) -> None:
        plan = self.plan
        effect = {item.name: plan.settings.sweep.patch_effect if full and item.name in plan.late
                  else expected_effect(plan, inc, item.name, item.patched) for item in swept}
        swept.sort(key=lambda item: (-effect[item.name], not item.patched, 0 if item.patched else item.count))


class SpaceOrderSweep(SweepProposer):
    """The parameters in the order the space lists them."""

    def order(self, swept: list[SweptParameter], inc: TrialRecord, full: bool) -> None:
        return None


def _sweeps(kind: type[SweepProposer]) -> dict[ProposerKind, Callable[[Plan], Proposer]]:
    return {ProposerKind.SWEEP: kind, ProposerKind.SWEEP_AGAIN: lambda plan: kind(plan, again=True)}


# ``NAME=VALUE`` -> the proposers it puts in place of the default's.
VARIANTS: dict[str, dict[ProposerKind, Callable[[Plan], Proposer]]] = {
    "cliff=said-full": {ProposerKind.CLIFF: SaidFullCliff},
    "sweep_order=effect": _sweeps(EffectOrderSweep),
    "sweep_order=space": _sweeps(SpaceOrderSweep),
}


def read_options(options: dict[str, Any]) -> tuple[GuidedSettings, dict[ProposerKind, Callable[[Plan], Proposer]]]:
    """The settings and the proposers swapped in of ``options`` (guided settings and variants of
    ``VARIANTS``); an unknown name or value is refused (ValueError)."""
    settings: dict[str, Any] = {}
    swapped: dict[ProposerKind, Callable[[Plan], Proposer]] = {}
    for name, value in options.items():
        variant = VARIANTS.get(f"{name}={value}")
        if variant is not None:
            swapped.update(variant)
        elif any(key.startswith(f"{name}=") for key in VARIANTS):
            raise ValueError(f"{name}={value}: not a variant; use one of {', '.join(VARIANTS)}")
        else:
            settings[name] = value
    return GuidedSettings.of(settings), swapped


def guided_strategy(space: Any, seed: int | None, options: dict[str, Any]) -> GuidedStrategy:
    """The guided strategy with ``options`` (:func:`read_options`)."""
    settings, swapped = read_options(options)
    kind = type("GuidedVariant", (GuidedStrategy,), {"proposer_types": {**GuidedStrategy.proposer_types, **swapped}})
    return kind(space, seed, settings)
