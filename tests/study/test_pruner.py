"""The baseline pruner: never on the first level alone, only when slower at every level so far."""

from __future__ import annotations

import optuna
import pytest

from tuner.study.pruner import BASELINE_ATTR, BaselinePruner, below_baseline

# Calibration figures (../shared/reference/calibration.md), through the emulator's data module.
from tuner.emulator.calibration import point


def _levels(point_id: str) -> dict[int, float]:
    return {c: v for c, v in point(point_id).throughput.items() if isinstance(v, (int, float))}


def test_seeds_winner_slower_at_64_is_not_pruned() -> None:
    baseline, n_on = _levels("B"), _levels("N-on")
    assert not below_baseline({64: n_on[64]}, baseline, 0.10)
    assert not below_baseline({64: n_on[64], 256: n_on[256]}, baseline, 0.10)
    n_off = _levels("N-off")
    assert n_off[64] < baseline[64]  # slower at the first level...
    assert not below_baseline({64: n_off[64], 256: n_off[256]}, baseline, 0.10)  # ...and kept


def test_slow_everywhere_is_pruned_after_two_levels() -> None:
    baseline, forced = _levels("B"), _levels("F")
    assert not below_baseline({64: forced[64]}, baseline, 0.10)  # never on the first level alone
    assert below_baseline({64: forced[64], 256: forced[256]}, baseline, 0.10)


def test_within_margin_is_not_pruned() -> None:
    baseline = {64: 1000.0, 256: 1000.0}
    assert not below_baseline({64: 910.0, 256: 905.0}, baseline, 0.10)
    assert below_baseline({64: 890.0, 256: 899.0}, baseline, 0.10)


def test_pruner_inside_an_optuna_study() -> None:
    study = optuna.create_study(direction="maximize", pruner=BaselinePruner(0.10))
    base = study.ask()
    base.set_user_attr(BASELINE_ATTR, True)
    for step, value in {64: 757.0, 256: 880.0, 512: 880.0}.items():
        base.report(value, step)
        assert not base.should_prune()
    study.tell(base, 880.0)

    slow = study.ask()
    slow.report(236.0, 64)
    assert not slow.should_prune()
    slow.report(236.0, 256)
    assert slow.should_prune()

    winner = study.ask()
    winner.report(689.0, 64)
    winner.report(1950.0, 256)
    assert not winner.should_prune()


def test_margin_is_validated() -> None:
    with pytest.raises(ValueError):
        BaselinePruner(1.5)
