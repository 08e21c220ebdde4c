"""The baseline pruner: never on the first level alone, only when slower at every level so far."""

from __future__ import annotations

import optuna
import pytest

from tuner.emulator.calibration import point
from tuner.study.pruner import BASELINE_ATTR, BaselinePruner, below_baseline, clean_values


def _levels(point_id: str) -> dict[int, float]:
    return {c: v for c, v in point(point_id).throughput.items() if isinstance(v, (int, float))}


def _level(c: int, tps: float, failed: int = 0, stop: str | None = None) -> dict:
    return {"concurrency": c, "output_throughput": tps, "completed": 100 - failed, "failed": failed,
            "stop_reason": stop}


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


def test_unclean_levels_are_not_compared() -> None:
    levels = [_level(64, 500.0), _level(256, 600.0, failed=5), _level(512, 700.0, stop="crash")]
    assert clean_values(levels, "output_throughput", 0.01) == {64: 500.0}


def test_pruner_inside_an_optuna_study() -> None:
    study = optuna.create_study(direction="maximize", pruner=BaselinePruner(0.10))
    base = study.ask()
    base.set_user_attr(BASELINE_ATTR, True)
    levels = []
    for step, value in {64: 757.0, 256: 880.0, 512: 880.0}.items():
        levels.append(_level(step, value))
        base.set_user_attr("levels", levels)
        base.report(value, step)
        assert not base.should_prune()
    study.tell(base, 880.0)

    def run(values: dict[int, float]) -> list[bool]:
        trial, done, verdicts = study.ask(), [], []
        for step, value in values.items():
            done.append(_level(step, value))
            trial.set_user_attr("levels", done)
            trial.report(value, step)
            verdicts.append(trial.should_prune())
        return verdicts

    assert run({64: 236.0, 256: 236.0}) == [False, True]  # calibration F
    assert run({64: 689.0, 256: 1950.0}) == [False, False]  # calibration N-off, slower at 64


def test_margin_is_validated() -> None:
    with pytest.raises(ValueError):
        BaselinePruner(1.5)
