"""The search benchmark's client-limited variant through the product's own loop and trial runner
(issue 39, 2 and 7): a level the client under-drove is run again with more client processes, its
re-run counts as host time, and what stays behind is stored as a lower bound on the trial."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench"))

from landscapes import GeneratedLandscape  # noqa: E402
from variants import ClientLimit, Signals, rerun_levels  # noqa: E402

import search_efficiency  # noqa: E402
from tuner.study.record import BOUND_LEVELS, LEVELS, read_levels, trial_figure  # noqa: E402


def test_a_client_that_falls_behind_is_scaled_then_its_levels_count_as_bounds(monkeypatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # this machine's cores, whatever runs the test
    # a client that keeps up with little: every level above half the baseline is flagged, and a
    # second process adds nothing (its cores are the server's)
    monkeypatch.setattr(ClientLimit, "drawn", classmethod(lambda cls, seed, value: cls(0.5 * value, 1.0, 0.0)))
    landscape = GeneratedLandscape(101)
    run = search_efficiency.run_strategy(landscape, "guided", 101, budget=4, signals=Signals.CLIENT_LIMITED)
    assert run.configs
    # every level ran twice (one process, then two), and each re-run is host time
    full = search_efficiency.run_strategy(landscape, "guided", 101, budget=4, signals=Signals.FULL)
    assert run.configs[0] == full.configs[0]  # the baseline first in both
    assert run.host_seconds[0] > full.host_seconds[0]


def test_the_levels_of_a_client_limited_trial_are_marked_and_ranked_as_bounds(monkeypatch) -> None:
    import optuna

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(ClientLimit, "drawn", classmethod(lambda cls, seed, value: cls(0.5 * value, 1.0, 0.0)))
    landscape = GeneratedLandscape(101)
    created: list[optuna.Study] = []
    original = optuna.create_study

    def keep(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        created.append(original(*args, **kwargs))
        return created[-1]

    monkeypatch.setattr(optuna, "create_study", keep)
    search_efficiency.run_strategy(landscape, "guided", 101, budget=2, signals=Signals.CLIENT_LIMITED)
    baseline = created[0].trials[0]
    levels = read_levels(baseline.user_attrs[LEVELS])
    flagged = [level for level in levels if level.measurement_bound]
    assert flagged, "no level of the baseline was client-limited"
    assert all(rerun_levels(level.client_runs) == 1 for level in flagged)  # run again with 2
    assert baseline.user_attrs[BOUND_LEVELS] == list(trial_figure(levels).bound_levels)
    # the trial's value is its best level, bounds included: never a lower level for a flag
    assert baseline.value == max(level.output_throughput for level in levels)
