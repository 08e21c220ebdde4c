"""optuna-dashboard shows what the tuner stored: study attributes, failure reasons, level figures.

Read through the dashboard's own HTTP API, as its web page reads it.
"""

from __future__ import annotations

import json
from pathlib import Path

from optuna.trial import TrialState

from tests.report.dashboard import attrs_of, running_dashboard
from tuner.study.record import level_figures


def check_dashboard_shows_study(storage_url: str, study_name: str, log: Path) -> None:
    """Assert that the study's attributes, reasons and per-level figures read back in full."""
    import optuna

    from tuner.study.storage import open_storage

    study = optuna.load_study(study_name=study_name, storage=open_storage(storage_url))
    with running_dashboard(storage_url, log) as dashboard:
        listed = {s["study_name"]: s for s in dashboard.get("/api/studies")["study_summaries"]}
        assert attrs_of(listed[study_name])["emulated"] == str(study.user_attrs["emulated"])
        detail = dashboard.study(study_name)
    shown = attrs_of(detail)
    for key in ("tuner_fingerprint", "space_file", "engine", "emulated", "time_scale"):
        assert key in shown, f"study attribute {key} missing in the dashboard"
    assert shown["tuner_fingerprint"] == study.user_attrs["tuner_fingerprint"]
    by_number = {t["number"]: t for t in detail["trials"]}
    assert sorted(by_number) == [t.number for t in study.trials]
    for trial in study.trials:
        page = by_number[trial.number]
        attrs = attrs_of(page)
        assert page["state"].upper() == trial.state.name
        if trial.state == TrialState.FAIL:
            assert attrs["failure_reason"] == trial.user_attrs["failure_reason"]
        if "pruned_reason" in trial.user_attrs:
            assert attrs["pruned_reason"] == trial.user_attrs["pruned_reason"]
        # every measured level's headline figures, in full (the levels JSON itself is cut at 1,024)
        for level in trial.user_attrs.get("levels", []):
            for key, value in level_figures(level).items():
                if value is not None:
                    assert float(attrs[key]) == value, (trial.number, key)
        steps = {p["step"]: p["value"] for p in page["intermediate_values"]}
        assert steps == {int(k): v for k, v in trial.intermediate_values.items()}
        config = json.loads(attrs["config"])  # short enough to stay whole
        assert config == trial.user_attrs["config"]


def test_dashboard_api_shows_the_synthetic_study(synthetic, tmp_path: Path) -> None:
    check_dashboard_shows_study(synthetic.url, synthetic.name, tmp_path / "dashboard.log")
