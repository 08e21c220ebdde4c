"""A study reads well in optuna-dashboard: the objective is named on its axes, every trial has a
Markdown note with what the terminal said of it (who chose it and why, its changes from the
baseline, a table of its levels, its outcome and reason), and the study's note names the winner.
Read through optuna-dashboard's own HTTP API, and the trial page rendered in headless Chromium."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.browser import CHROMIUM, dump_dom, screenshot
from tests.support.dashboard import running_dashboard
from tests.support.studies import re_runs
from tuner.study.record import changes_from

pytestmark = pytest.mark.skipif(not os.access(CHROMIUM, os.X_OK), reason=f"needs {CHROMIUM} (.ci/install)")


def test_every_trial_has_a_note_and_the_axes_name_the_objective(emulated_study, tmp_path: Path) -> None:
    run = emulated_study()
    done = run.optimize(4)
    study = run.study()
    trials = study.get_trials(deepcopy=False)
    assert len(trials) + re_runs(study) == 4  # the budget's last trial may re-run the winner
    baseline = trials[0].user_attrs["config"]
    with running_dashboard(run.storage, tmp_path / "dashboard.log", cwd=run.dir) as dashboard:
        detail = dashboard.study(run.name)
        assert detail["objective_names"] == ["output_throughput (tok/s)"]
        assert "winner: trial" in detail["note"]["body"]
        assert "`max_running_requests is set`" in detail["note"]["body"]  # the helper, explained
        # what the dashboard plots: the helper under a name that reads, never "NAME__set"
        plotted = {p["name"] for p in detail["union_search_space"]}
        assert "max_running_requests is set" in plotted and "max_running_requests" in plotted, plotted
        assert not any(name.endswith("__set") for name in plotted), plotted
        notes = {t["number"]: t["note"]["body"] for t in detail["trials"]}
        for trial in trials:
            note = notes[trial.number]
            assert note.startswith(f"## {'Baseline' if trial.number == 0 else 'Trial'} {trial.number} (emulated host")
            assert "**Chosen by:**" in note and f"**Outcome:** {trial.state.name}" in note
            for change in changes_from(baseline, trial.user_attrs["config"]):
                assert f"- `{change.name}`: " in note  # every setting that differs, and its baseline
            for level in trial.user_attrs.get("levels", []):
                assert f"| c={level['concurrency']} | {level['output_throughput']:,.0f} |" in note
            if trial.number:
                assert trial.user_attrs["chosen_by"] in note
            if trial.state.name == "FAIL":
                assert trial.user_attrs["failure_reason"] in note
            # the terminal's line of the trial shows the same changes, not all 17 settings
            if trial.number and changes_from(baseline, trial.user_attrs["config"]):
                line = next(l for l in done.stderr.splitlines() if l.startswith(f"trial {trial.number} ("))
                assert "(baseline " in line and len(line) < 400
                assert all(f"{name}=" not in line for name in baseline
                           if baseline[name] == trial.user_attrs["config"][name])
        summaries = dashboard.get("/api/studies")["study_summaries"]
        study_id = next(s["study_id"] for s in summaries if s["study_name"] == run.name)
        page = f"{dashboard.base}/dashboard/studies/{study_id}/trials?numbers=1"
        dom = dump_dom(page, tmp_path / "chromium-dom")
        assert "Changes from the baseline" in dom and "Chosen by" in dom, dom[-2000:]
        shot = screenshot(page, tmp_path / "trial.png", tmp_path / "chromium-shot", height=1400)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    assert json.loads(json.dumps(study.metric_names)) == ["output_throughput (tok/s)"]
