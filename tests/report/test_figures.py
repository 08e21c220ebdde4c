"""What each figure of the report shows, checked against the study it was drawn from."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import optuna
from optuna.trial import TrialState

from tests.support.study_factory import BASELINE, DISTRIBUTIONS, level_dict
from tuner.report import FIGURE_COUNT, build_report, pareto_front
from tuner.report._fig_failures import BINS, failure_reason_figure, outcome_table, value_groups
from tuner.report._fig_levels import concurrency_figure, gpu_figure, latency_figure
from tuner.report._fig_search import history_figure, importance_figure, parallel_figure
from tuner.report._page import _figures
from tuner.report._view import outcome_text
from tuner.study.record import read_view


def test_pareto_front_keeps_only_points_nothing_beats() -> None:
    points = [
        (100.0, 50.0),
        (200.0, 80.0),
        (150.0, 90.0),
        (300.0, 300.0),
        (250.0, 400.0),
        (200.0, 60.0),
    ]
    front = pareto_front(points)
    assert front == [(100.0, 50.0), (200.0, 60.0), (300.0, 300.0)]
    for x, y in points:
        if (x, y) not in front:
            assert any(fx >= x and fy <= y for fx, fy in front)  # each left-out point is beaten


def test_history_draws_the_baseline_as_a_line_and_marks_the_best(synthetic) -> None:
    view = read_view(synthetic.study)
    fig = history_figure(view)
    baseline_lines = [s for s in fig.layout.shapes if s.y0 == s.y1 == view.baseline_trial.value]
    assert len(baseline_lines) == 1
    assert any("baseline" in a.text for a in fig.layout.annotations)
    best = next(t for t in fig.data if t.name.startswith("best stable"))
    assert list(best.x) == [view.best_stable.number] and list(best.y) == [view.best_stable.value]
    failed = next(t for t in fig.data if t.name.startswith("failed"))
    fails = [t.number for t in synthetic.study.trials if t.state == TrialState.FAIL]
    assert sorted(failed.x) == fails and set(failed.y) == {0.0}


def test_throughput_curves_for_baseline_best_and_top_five(synthetic) -> None:
    view = read_view(synthetic.study)
    fig = concurrency_figure(view)
    names = [t.name for t in fig.data]
    assert names[0] == "baseline (trial 0)"
    assert names[-1] == f"best: trial {view.best_stable.number}"
    assert len([n for n in names if n.startswith("#")]) == 5
    best = fig.data[-1]
    assert dict(zip(best.x, best.y)) == {
        lv.concurrency: lv.output_throughput for lv in view.best_stable.levels
    }
    # the best is the validated stable trial, and the top five are the next fastest others
    assert view.best_stable.soak_stable is True
    others = sorted(
        (
            t
            for t in synthetic.study.trials
            if t.state == TrialState.COMPLETE and t.number not in (0, view.best_stable.number)
        ),
        key=lambda t: -t.value,
    )
    assert [n for n in names if n.startswith("#")] == [
        f"#{i}: trial {t.number}" for i, t in enumerate(others[:5], 2)
    ]


def test_latency_points_are_clean_levels_and_fronts_are_drawn(synthetic) -> None:
    view = read_view(synthetic.study)
    fig = latency_figure(view)
    clean = sum(len(r.reported) for r in view.records)
    drawn = sum(len(t.x) for t in fig.data if t.name.startswith("c=") and t.xaxis == "x")
    assert drawn == clean
    fronts = [t for t in fig.data if t.name == "Pareto front"]
    assert len(fronts) == 2 and all(len(t.x) >= 2 for t in fronts)


def test_failures_grouped_by_reason_match_the_study(synthetic) -> None:
    view = read_view(synthetic.study)
    bars = failure_reason_figure(view).data[0]
    expected = Counter(
        t.user_attrs.get("failure_reason") or f"pruned: {t.user_attrs['pruned_by']}"
        for t in synthetic.study.trials
        if t.state != TrialState.COMPLETE
    )
    assert dict(zip(bars.x, bars.y)) == dict(expected)


def test_outcomes_by_parameter_value_point_at_the_breaking_setting(synthetic) -> None:
    rows, outcomes, cells = outcome_table(read_view(synthetic.study))
    row = dict(zip(outcomes, cells[rows.index("disable_cuda_graph = True")]))
    graphs_off = [
        t for t in synthetic.study.trials if t.user_attrs["config"].get("disable_cuda_graph")
    ]
    # graphs off crash at 512 in the factory's model unless something else stopped them first
    assert row["unstable-at-512"] >= 1
    assert row.get("ok", 0) == 0
    assert sum(row.values()) == len(graphs_off)


def test_importances_rank_parameters_or_explain_why_not(synthetic, tmp_path: Path) -> None:
    view = read_view(synthetic.study)
    bars = importance_figure(synthetic.study, view).data[0]
    assert set(bars.y) <= set(DISTRIBUTIONS) and len(bars.y) >= 3
    assert abs(sum(bars.x) - 1.0) < 1e-6
    few = optuna.create_study(storage=f"sqlite:///{tmp_path / 'few.db'}", direction="maximize")
    few.add_trial(
        optuna.trial.create_trial(
            params={"mem_fraction_static": 0.9},
            distributions={"mem_fraction_static": DISTRIBUTIONS["mem_fraction_static"]},
            value=1.0,
            user_attrs={"config": {"mem_fraction_static": 0.9}},
        )
    )
    note = importance_figure(few, read_view(few))
    assert not note.data and "needs at least" in note.layout.annotations[0].text


def test_gpu_figure_has_one_point_per_level_with_telemetry(synthetic) -> None:
    view = read_view(synthetic.study)
    fig = gpu_figure(view)
    with_gpu = [
        lv for t in synthetic.study.trials for lv in t.user_attrs.get("levels", []) if "gpu" in lv
    ]
    power = next(t for t in fig.data if "power" in t.name)
    assert len(power.x) == len(with_gpu)
    assert any("power limit 600 W" in a.text for a in fig.layout.annotations)


def test_parallel_coordinates_cover_every_finished_trial(synthetic) -> None:
    view = read_view(synthetic.study)
    coords = parallel_figure(view).data[0]
    labels = [d.label for d in coords.dimensions]
    assert labels[-2:] == ["outcome", "output tok/s (emulated)"]
    assert len(coords.dimensions[-1]["values"]) == len(synthetic.study.trials)


def test_every_figure_of_an_emulated_study_says_so(synthetic) -> None:
    figures = _figures(synthetic.study, read_view(synthetic.study))
    assert len(figures) == FIGURE_COUNT
    for fig, _ in figures:
        assert fig.layout.title.text.endswith("(emulated)"), fig.layout.title.text


def test_page_is_self_contained_and_escapes_study_text(tmp_path: Path) -> None:
    study = optuna.create_study(
        storage=f"sqlite:///{tmp_path / 'x.db'}", study_name="<b>x</b>", direction="maximize"
    )
    hostile = {**BASELINE, "attention_backend": "</script><script>alert(1)</script>"}
    study.add_trial(
        optuna.trial.create_trial(
            params={"mem_fraction_static": 0.9},
            distributions={"mem_fraction_static": DISTRIBUTIONS["mem_fraction_static"]},
            value=500.0,
            intermediate_values={64: 500.0},
            user_attrs={
                "config": hostile,
                "is_baseline": True,
                "stable": True,
                "levels": [level_dict(64, 500.0, cap=64)],
                "command_line": "serve --x '<img src=x>'",
            },
        )
    )
    page = build_report(study)
    assert "<script>alert(1)" not in page and "<img src=x>" not in page and "<b>x</b>" not in page
    assert "&lt;img src=x&gt;" in page
    assert "<script src" not in page.lower()  # plotly.js is inline, once
    assert page.count("Plotly.newPlot(") == FIGURE_COUNT


def test_continuous_values_are_grouped_in_ranges_and_flags_stay_apart() -> None:
    values = [0.85, 0.86, 0.87, 0.88, 0.9, 0.91, 0.93, 0.95, None]
    labels, order = value_groups(values)
    assert len(order) == BINS + 1 and order[-1] == "unset"
    assert labels[0] == order[0] and labels[-1] == "unset" and labels[-2] == order[BINS - 1]
    assert order[0].startswith("0.85-") and order[BINS - 1].endswith("-0.95")
    few = [64, 256, 64, None]
    assert value_groups(few) == (["64", "256", "64", "unset"], ["64", "256", "unset"])
    assert value_groups([True, False, True])[1] == ["False", "True"]


def test_a_trial_unstable_in_its_soak_is_not_the_best(tmp_path: Path) -> None:
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'soak.db'}", direction="maximize")
    for number, (value, soak) in enumerate([(500.0, None), (900.0, False), (700.0, True)]):
        attrs = {
            "config": {**BASELINE, "chunked_prefill_size": 1024 * (number + 1)},
            "stable": True,
            "is_baseline": number == 0,
            "levels": [level_dict(64, value, cap=None)],
        }
        if soak is not None:
            attrs["validation"] = {"stable": soak, "runs": 2}
        study.add_trial(
            optuna.trial.create_trial(
                params={},
                distributions={},
                value=value,
                intermediate_values={64: value},
                user_attrs=attrs,
            )
        )
    view = read_view(study)
    assert view.best_stable.number == 2  # the faster trial 1 broke in its soak
    assert outcome_text(view.records[1]) == "unstable in soak"
    assert "unstable in soak" in failure_reason_figure(view).data[0].x
