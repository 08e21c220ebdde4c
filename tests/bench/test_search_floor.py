"""The floor script's account of where a strategy's trials go (``bench/search_floor.py
--by-reason``): each trial's gain is its step of the highest noise-free value, so the gains add
up to the run's whole climb, and the trial it stops at is the benchmark's own count."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

import search_efficiency as bench  # noqa: E402
import search_floor  # noqa: E402
from variants import Signals  # noqa: E402


def test_a_reason_names_its_kind_and_the_swept_parameter() -> None:
    assert search_floor.reason_kind("sweep: radix_cache=False") == "sweep: radix_cache"
    assert search_floor.reason_kind("sweep: moe_runner_backend=flashinfer_cutlass with patch autotune_gate") \
        == "sweep: moe_runner_backend"
    assert search_floor.reason_kind("rule: cap binds at 64: throughput flat from 64 to 1024 (client): x") == "rule"
    assert search_floor.reason_kind("baseline") == "baseline"


@pytest.mark.parametrize("noise", [1.0, 0.0])
def test_the_gains_by_reason_add_up_to_the_climb_and_stop_where_the_bench_counts(noise: float) -> None:
    landscape = bench._landscape("generated", 2)
    _, target = bench._oracle("generated", 2)
    scaled = search_floor.with_noise(landscape, noise)
    assert scaled.noise == landscape.noise * noise and landscape.noise > 0  # the cached one is not changed
    run = bench.run_strategy(scaled, "guided", 2, 40, signals=Signals.NONE)
    rows, reached = search_floor.by_reason(run, landscape, target)
    assert reached == bench.reach(run.configs, landscape, target)
    values = [landscape.outcome(c).value or 0.0 for c in run.configs[: len(rows)]]
    first = next(v for v in values if v > 0)
    assert sum(gain for _, gain in rows) == pytest.approx(math.log(max(values) / first))
    assert all(gain >= 0 for _, gain in rows) and rows[0][0] == "baseline"


def test_the_script_prints_the_table_and_the_bound(capsys: pytest.CaptureFixture[str]) -> None:
    assert search_floor.main(["--seeds", "2-3", "--strategy", "guided", "--signals", "none",
                              "--noise-scale", "0", "--by-reason", "--budget", "40"]) == 0
    out = capsys.readouterr().out
    assert "guided (signals none, noise x0): median" in out
    assert "| kind of reason | trials up to 95% (or 40) |" in out and "(a bound, not a strategy)" in out


def test_a_trial_built_on_a_base_below_the_best_run_before_it_is_counted() -> None:
    values = {"a": 100.0, "b": 110.0, "c": 100.0, "d": 0.0, "e": 0.0}

    class Values:  # noise-free values of hand-made configurations (pure logic: no landscape)
        def outcome(self, config: dict[str, str]) -> object:
            return type("Outcome", (), {"value": values[config["name"]] if config["x"] == "0" else 0.0})()

    configs = [{"name": "a", "x": "0"}, {"name": "b", "x": "0"},  # b: one change of a, 10% faster
               {"name": "c", "x": "0"},  # one change of b (the latest closest): b is the best, not below
               {"name": "c", "x": "1"},  # one change of c (100, below b's 110 by more than 2%): counted
               {"name": "e", "x": "1"}]  # closest: c x=1, which failed (a repair): not counted
    run = bench.Run(configs, ["baseline"] + ["sweep: x"] * 4, [0.0] * 5)
    assert search_floor.below_best(run, Values(), None) == (1, 3)
    assert search_floor.below_best(run, Values(), 3) == (0, 2)  # up to the trial that reached 95%


def test_a_confirmed_new_best_is_read_as_the_mean_of_two_runs_and_each_second_run_is_counted() -> None:
    landscape = bench._landscape("generated", 2)
    _, target = bench._oracle("generated", 2)
    plain = bench.run_strategy(landscape, "guided", 2, 20, signals=Signals.NONE)
    never = search_floor.Confirming(landscape, 0.0)
    assert bench.run_strategy(never, "guided", 2, 20, signals=Signals.NONE).configs == plain.configs
    assert never.extra == [] and never.counted(7) == 7
    every = search_floor.Confirming(landscape, 10.0)  # every new best below +10 sigma: measured twice
    run = bench.run_strategy(every, "guided", 2, 20, signals=Signals.NONE)
    assert every.extra and every.runs >= len(run.configs)
    at = every.extra[0]
    assert every.counted(at) == at + 1 and every.counted(None) is None
    assert every.counted(len(run.configs)) == len(run.configs) + len(every.extra)


def test_a_climber_that_takes_only_visible_moves_stops_where_no_move_is_seen() -> None:
    landscape = bench._landscape("generated", 2)
    _, target = bench._oracle("generated", 2)
    free = search_floor.climb(landscape, target, pairs=True)
    assert free is not None
    assert search_floor.climb(landscape, target, pairs=True, visible=0.0) == free
    # a visible climber takes a pair where the best single change is too small to see: it may
    # arrive sooner (a pair is one trial) or not at all, never from nowhere
    seen = search_floor.climb(landscape, target, pairs=True, visible=1.0)
    assert seen is None or seen >= 2
    # a move must gain more than the whole gap to 95%: from the baseline, nothing is seen
    baseline = landscape.outcome(landscape.space.config(dict(landscape.space.baseline), drop_inactive=True)).value
    huge = (target / baseline) / landscape.noise  # the gain of a move that would jump to the target, in noise units
    assert search_floor.climb(landscape, target, pairs=True, visible=huge + 1) is None
