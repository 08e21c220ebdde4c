"""The guided strategy's settings: an ordered list of proposers with typed parameters, each
validated when made (an unknown proposer, setting or value is refused, never ignored)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from tests.support.guided import record, space, variant, view  # noqa: F401 (space: a fixture)
from tuner.study.strategies import MoveKind
from tuner.study.strategies.guided import (
    DEFAULT_PROPOSERS, CliffProposer, GuidedSettings, GuidedStrategy, ModelSettings, ProposerKind, SweepProposer,
    SweepSettings,
)


def test_the_default_composition_asks_every_proposer_in_order(space: Any) -> None:
    assert len(fields(GuidedSettings)) <= 10
    assert GuidedSettings().proposers == DEFAULT_PROPOSERS == tuple(ProposerKind)
    strategy = GuidedStrategy(space, 0)
    assert [type(p).__name__ for p in strategy.proposers] == [
        "RuleProposer", "RepairProposer", "CapacityRetryProposer", "CliffProposer", "SweepProposer", "ModelProposer",
        "CombineProposer", "SweepProposer"]
    assert [getattr(p, "again", None) for p in strategy.proposers if isinstance(p, SweepProposer)] == [False, True]


def test_the_proposers_named_are_the_ones_asked(space: Any) -> None:
    best = record(space, 0, {"max_running_requests": 1024}, value=2000.0)  # a log that says nothing
    assert GuidedStrategy(space, 0).propose(view(best)).move.kind is MoveKind.CLIFF
    sweep_first = GuidedStrategy(space, 0, GuidedSettings(proposers=("sweep", "cliff")))
    assert sweep_first.propose(view(best)).move.kind is MoveKind.SWEEP
    rules_only = GuidedStrategy(space, 0, GuidedSettings(proposers=("rules",)))
    assert rules_only.propose(view(best)) is None  # no rule fires on a silent log: the sampler draws
    named = GuidedSettings.of({"proposers": "sweep,cliff"})
    assert named.proposers == (ProposerKind.SWEEP, ProposerKind.CLIFF)


@pytest.mark.parametrize("values, refused", [
    ({"proposers": "rules,nope"}, "'nope' is not a proposer"),
    ({"proposers": "rules,rules"}, "names one twice"),
    ({"sweep_order": "cheap"}, "'sweep_order' is not a guided setting"),
    ({"sweep_late": 1}, "'sweep_late' is not a guided setting"),
    ({"sweep.nope": 1}, "'sweep.nope' is not a guided setting"),
    ({"explore_every": -1}, "out of range"),
    ({"retry_gain": 0.5}, "out of range"),
    ({"sweep.points": True}, "not of type int"),
    ({"model.known_loss": 2.0}, "out of range"),
    ({"model.radius": "4"}, "not of type int"),
])
def test_an_unknown_setting_or_value_is_refused(values: dict[str, Any], refused: str) -> None:
    with pytest.raises(ValueError, match=refused):
        GuidedSettings.of(values)


def test_typed_parameters_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match="SweepSettings.points"):
        SweepSettings(points=1)
    with pytest.raises(ValueError, match="ModelSettings.draws"):
        ModelSettings(draws=0)
    with pytest.raises(ValueError, match="GuidedSettings.sweep"):
        GuidedSettings(sweep=ModelSettings())  # type: ignore[arg-type]
    assert GuidedSettings.of({"sweep.points": 3, "model.radius": 6}) == GuidedSettings(
        sweep=SweepSettings(points=3), model=ModelSettings(radius=6))


def test_a_bench_variant_puts_its_proposer_in_place_of_the_default(space: Any) -> None:
    said_full = variant(space, {"cliff": "said-full", "explore_every": 4})
    assert said_full.settings.explore_every == 4
    cliffs = [p for p in said_full.proposers if isinstance(p, CliffProposer)]
    assert len(cliffs) == 1 and type(cliffs[0]) is not CliffProposer
    with pytest.raises(ValueError, match="sweep_order=cheap: not a variant"):
        variant(space, {"sweep_order": "cheap"})
