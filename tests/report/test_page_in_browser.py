"""The report opened in real headless Chromium: no JavaScript error, every figure drawn, offline."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from tests.support.browser import inspect_page
from tests.support.study_factory import BASELINE, DISTRIBUTIONS, level_dict
from tuner.report import FIGURE_COUNT, write_report

pytestmark = pytest.mark.browser


def test_report_draws_every_figure_without_errors(synthetic, chromium, tmp_path: Path) -> None:
    page = write_report(synthetic.study, tmp_path / "out" / "report.html")
    seen = inspect_page(page, tmp_path / "chromium", FIGURE_COUNT)
    assert seen.errors == []
    assert seen.figures == seen.divs == FIGURE_COUNT
    assert seen.drawn == FIGURE_COUNT
    assert seen.title == f"tuner report: {synthetic.name} (emulated)"
    assert seen.external_requests == []  # self-contained: plotly.js inline, no CDN


def test_checker_reports_a_broken_page(chromium, tmp_path: Path) -> None:
    """The browser check can fail: a script error and a figure that never draws are both seen."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<html><head><title>broken</title></head><body>"
        '<div class="plotly-graph-div js-plotly-plot" id="a"></div>'
        "<script>console.error('drawing failed'); undefinedFunction();</script>"
        "</body></html>"
    )
    seen = inspect_page(page, tmp_path / "chromium", expected_figures=1, timeout=3)
    assert any("undefinedFunction" in e for e in seen.errors), seen.errors
    assert any("drawing failed" in e for e in seen.errors), seen.errors
    assert seen.figures == 1 and seen.drawn == 0


def _sparse_study(url: str) -> optuna.Study:
    """Only the baseline ran, and its second trial crashed at start: little to draw."""
    study = optuna.create_study(storage=url, study_name="sparse", direction="maximize")
    study.set_user_attr("emulated", False)
    levels = [level_dict(64, 700.0, cap=64), level_dict(256, 720.0, cap=64)]
    for level in levels:
        level.update(emulated=False, time_scale=1.0)
    params = {"moe_runner_backend": "flashinfer_trtllm"}
    dist = {"moe_runner_backend": DISTRIBUTIONS["moe_runner_backend"]}
    study.add_trial(
        optuna.trial.create_trial(
            params=params,
            distributions=dist,
            value=720.0,
            intermediate_values={64: 700.0, 256: 720.0},
            user_attrs={
                "config": {**BASELINE},
                "is_baseline": True,
                "stable": True,
                "levels": levels,
            },
        )
    )
    study.add_trial(
        optuna.trial.create_trial(
            state=optuna.trial.TrialState.FAIL,
            params={"moe_runner_backend": "triton"},
            distributions=dist,
            user_attrs={
                "config": {**BASELINE, "moe_runner_backend": "triton"},
                "failure_reason": "startup-crash",
            },
        )
    )
    return study


def test_sparse_real_study_still_draws_every_figure_with_notes(chromium, tmp_path: Path) -> None:
    study = _sparse_study(f"sqlite:///{tmp_path / 'sparse.db'}")
    page = write_report(study, tmp_path / "sparse.html")
    html = page.read_text()
    assert "needs at least" in html  # importances: a note instead of a crash
    assert "no GPU telemetry" in html
    seen = inspect_page(page, tmp_path / "chromium", FIGURE_COUNT)
    assert seen.errors == []
    assert seen.drawn == FIGURE_COUNT
    assert seen.title == "tuner report: sparse"  # a real study's title says nothing of emulation
