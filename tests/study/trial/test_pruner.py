"""The baseline pruner: never on the first level alone, only when the levels still to come could not
overturn the decision (measured from the top concurrency down)."""

from __future__ import annotations

import math
import random

import optuna
import pytest

from tuner.emulator.calibration import point
from tuner.study.record import IS_BASELINE
from tuner.study.trial import (
    BaselinePruner,
    below_baseline,
    clean_values,
    measurement_order,
)


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
    base.set_user_attr(IS_BASELINE, True)
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


# -- a pruning decision the levels still to come could not overturn (issue 12, item 7) -------------

def _decisions(curve: dict[int, float], baseline: dict[int, float], margin: float = 0.10) -> list[bool]:
    """The rule's verdict after each level, measured as the runner measures them (top first)."""
    done: dict[int, float] = {}
    verdicts = []
    for c in measurement_order(list(curve)):
        done[c] = curve[c]
        verdicts.append(below_baseline(dict(done), baseline, margin, pending=set(curve) - set(done)))
    return verdicts


def test_levels_are_measured_top_first() -> None:
    assert measurement_order([64, 256, 512, 1024]) == [1024, 512, 256, 64]


def test_seeds_shape_is_never_pruned_measured_top_first() -> None:
    baseline = _levels("B")
    n_on = {c: _levels("N-on")[c] for c in (64, 256, 1024)}  # the emulated workload's levels
    assert n_on[64] < baseline[64] * 1.01  # the trap: no faster than the baseline at 64...
    assert _decisions(n_on, baseline) == [False, False, False]  # ...never pruned
    forced = {c: _levels("F")[c] for c in (64, 256, 1024)}
    assert _decisions(forced, baseline) == [False, True, True]  # slow everywhere: stopped early


CAPPED = {16: 300.0, 64: 900.0, 256: 900.0, 512: 900.0}  # a baseline capped at 64 requests


def test_capped_baseline_keeps_configurations_that_win_at_the_top() -> None:
    # Slower than the capped baseline at 16 and 64, 1.1x and 2.6x at 512: a bottom-up rule
    # (every level so far below) would stop these after 64.
    for top in (990.0, 2340.0):
        curve = {16: 150.0, 64: 600.0, 256: top * 0.8, 512: top}
        assert below_baseline({16: 150.0, 64: 600.0}, CAPPED, 0.10)  # what a bottom-up rule sees
        assert _decisions(curve, CAPPED) == [False, False, False, False]
    slow = {16: 100.0, 64: 300.0, 256: 500.0, 512: 520.0}
    assert _decisions(slow, CAPPED) == [False, True, True, True]  # saves the levels 64 and 16


def test_a_curve_past_its_peak_at_the_top_is_not_pruned_until_its_peak_is_seen() -> None:
    overloaded = {16: 200.0, 64: 1000.0, 256: 700.0, 512: 300.0}  # best at 64, falls after
    assert _decisions(overloaded, CAPPED) == [False, False, False, False]


def test_pruning_never_kills_a_winner_on_random_capped_landscapes() -> None:
    """Unimodal curves (rise, saturate at a cap, maybe fall under overload) against capped
    baselines: a pruned trial's best is always below the baseline's by the margin, and clearly
    slow trials are stopped before their last level."""
    rng = random.Random(12)
    levels = (16, 64, 256, 512)
    pruned_early = 0
    for _ in range(2000):
        base_cap = rng.choice(levels[:3])
        base_rate = rng.uniform(5.0, 20.0)
        baseline = {c: base_rate * min(c, base_cap) for c in levels}
        cap, rate = rng.choice(levels), rng.uniform(2.0, 40.0)
        fall = rng.choice([0.0, 0.0, 0.3, 0.6])
        # Past the cap, overload (preemption) costs more the further it goes: a unimodal curve.
        curve = {c: rate * min(c, cap) * (1.0 - fall) ** max(0.0, math.log2(c / cap)) for c in levels}
        verdicts = _decisions(curve, baseline)
        winner = max(curve.values()) >= 0.9 * max(baseline.values())
        if winner:
            assert not any(verdicts), (curve, baseline, verdicts)
        elif verdicts[1]:
            pruned_early += 1
    assert pruned_early > 200  # the rule still saves host time on losers
