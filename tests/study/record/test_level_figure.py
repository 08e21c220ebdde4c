"""The one rule a trial's figure follows (tuner/study/record/_figure.py): every level counts, a
level the client under-drove as a lower bound, judged by how much its shortfall moves it."""

from __future__ import annotations

import math

import pytest

from tuner.space._workload import Objective, Slo
from tuner.study.record import EXACT_WITHIN, figures_by_level, trial_figure
from tuner.study.record._figure import as_level, shortfall_effect
from tuner.study.trial import objective_value
from tuner.study.trial._pruner import below_baseline, clean_values, _has_bound


def level(c: int, tps: float, bound: str | None = None, in_flight: float | None = None,
          p99_ttft_ms: float = 100.0) -> dict:
    return {"concurrency": c, "num_requests": 4 * c, "completed": 4 * c, "failed": 0,
            "stop_reason": None, "output_throughput": tps, "measurement_bound": bound,
            "in_flight": in_flight, "p99_ttft_ms": p99_ttft_ms, "median_tpot_ms": 20.0}


def test_a_flagged_top_level_ranks_as_a_bound_not_on_a_lower_level() -> None:
    # issue 39: 3,789 at c=512 and 2,929 at c=256, both flagged, ranked at 1,573 (its c=64)
    levels = [level(64, 1573.0), level(256, 2929.0, "late", 240.0), level(512, 3789.0, "late", 480.0)]
    figure = trial_figure(levels)
    assert figure.value == 3789.0 and figure.concurrency == 512 and figure.bound
    assert figure.bound_levels == (256, 512)
    assert objective_value(levels, Objective())[0] == [3789.0]
    # beside a trial whose top level was measured cleanly at 3,700, it now ranks first
    other = trial_figure([level(64, 1600.0), level(256, 3000.0), level(512, 3700.0)])
    assert figure.value > other.value and not other.bound


def test_a_bound_lifts_a_figure_but_never_sinks_it() -> None:
    # a bound below a measured level leaves the measured one the figure
    figure = trial_figure([level(256, 3000.0), level(512, 1200.0, "late", 200.0)])
    assert figure.value == 3000.0 and not figure.bound


def test_whether_a_level_counts_is_judged_by_how_much_its_shortfall_moves_it() -> None:
    # 6% fewer in flight near saturation (throughput +5.6% from 128 to 256): it moves the
    # figure by 0.5%, under EXACT_WITHIN: measured, not a bound
    flat = figures_by_level([as_level(level(128, 3600.0)), as_level(level(256, 3800.0)),
                          as_level(level(512, 3990.0, "late", 481.0))], "output_throughput", 0.01)
    slope = math.log(3800 / 3600) / math.log(2)
    assert flat[512].effect == pytest.approx((512 / 481) ** slope - 1)
    assert flat[512].effect < EXACT_WITHIN and not flat[512].bound
    # the same shortfall where throughput still doubles with concurrency: 6.4%, a bound
    steep = figures_by_level([as_level(level(128, 1000.0)), as_level(level(256, 2000.0)),
                           as_level(level(512, 4000.0, "late", 481.0))], "output_throughput", 0.01)
    assert steep[512].effect == pytest.approx(512 / 481 - 1) and steep[512].bound
    # a level stored before the client counted its requests in flight: a bound of unknown degree
    old = figures_by_level([as_level(level(512, 4000.0, "the client lagged"))], "output_throughput", 0.01)
    assert old[512].effect is None and old[512].bound
    # a flagged figure below the level beneath it does not set its own slope (it is what is in
    # doubt): one level measured cleanly beside it is no slope, so it is judged as proportional
    fell = figures_by_level([as_level(level(256, 2950.0)), as_level(level(512, 2000.0, "late", 300.0))],
                         "output_throughput", 0.01)
    assert fell[512].effect == pytest.approx(512 / 300 - 1) and fell[512].bound
    assert shortfall_effect(512, 512.0, 1.0) == 0.0


def test_a_study_that_judges_latencies_leaves_a_bound_out() -> None:
    objective = Objective(slo=Slo(p99_ttft_ms=500.0))
    levels = [level(256, 3000.0), level(512, 4000.0, "late", 300.0)]
    assert objective_value(levels, objective)[0] == [3000.0]
    minimize = Objective(minimize="p99_ttft_ms")
    assert objective_value(levels, minimize)[0] == [3000.0, 100.0]


def test_a_bound_level_never_prunes_a_trial() -> None:
    baseline = {64: 2000.0, 256: 4000.0}
    levels = [level(256, 1000.0, "late", 100.0), level(64, 800.0)]
    values = clean_values(levels, "output_throughput", 0.01)
    assert below_baseline(values, baseline, 0.1)  # as figures alone it would be pruned
    assert _has_bound(levels, "output_throughput", 0.01)


def test_emulated_host_time_is_the_emulated_parts_plus_the_tuners_own_time() -> None:
    from tuner.study.trial import host_seconds
    from tuner.timescale import TimeScale

    k400 = TimeScale(400.0)
    # 330 host seconds of start-up and levels took 0.825 s of the 3 s wall: the other 2.175 s
    # were the tuner's own (processes, probe, warm-up), counted as they ran, not x400
    assert host_seconds(3.0, 330.0, k400) == pytest.approx(330.0 + 3.0 - 330.0 / 400)
    assert host_seconds(3.0, 0.0, k400) == pytest.approx(1200.0)  # nothing reported: as it ran, x K
    assert host_seconds(3.0, 330.0, TimeScale()) == 3.0  # a real host: its wall time
