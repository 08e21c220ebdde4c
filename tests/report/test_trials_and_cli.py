"""`tuner trials --csv|--json`, `tuner report`, and the one-line errors of a missing study."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from optuna.trial import TrialState

from tests.report.conftest import GLM5
from tuner.report import trials_frame


def _study_args(synthetic) -> list[str]:
    return ["--storage", synthetic.url, "--study-name", synthetic.name]


def test_frame_has_one_row_per_trial_with_settings_reasons_and_levels(synthetic) -> None:
    frame = trials_frame(synthetic.study)
    trials = synthetic.study.trials
    assert list(frame["number"]) == [t.number for t in trials]
    assert list(frame["state"]) == [t.state.name for t in trials]
    baseline = frame.loc[0]
    assert bool(baseline["is_baseline"]) and baseline["config.max_running_requests"] == 64
    for level in trials[0].user_attrs["levels"]:
        c = level["concurrency"]
        assert baseline[f"tps@{c}"] == level["output_throughput"]
        assert baseline[f"p99_ttft_ms@{c}"] == level["p99_ttft_ms"]
        assert baseline[f"measurement_bound@{c}"] == bool(level.get("measurement_bound"))
    crashed = next(t for t in trials if t.user_attrs.get("failure_reason") == "unstable-at-512")
    row = frame.loc[crashed.number]
    assert (
        row["reason"] == "unstable-at-512"
        and row["tps@512"] == crashed.user_attrs["levels"][-1]["output_throughput"]
    )
    assert (
        str(frame["config.cuda_graph_max_bs"].dtype) == "Int64"
    )  # integers stay integers across gaps
    validated = frame[frame["validated"].fillna(False).astype(bool)]
    assert len(validated) == 1 and validated.iloc[0]["validated_std_tps"] > 0


def test_trials_csv_on_stdout(synthetic, tuner) -> None:
    result = tuner("trials", str(GLM5), *_study_args(synthetic), "--csv")
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == len(synthetic.study.trials)
    by_number = {int(r["number"]): r for r in rows}
    for trial in synthetic.study.trials:
        row = by_number[trial.number]
        assert row["state"] == trial.state.name
        if trial.state == TrialState.FAIL:
            assert row["reason"] == trial.user_attrs["failure_reason"]
        if trial.state == TrialState.COMPLETE:
            assert float(row["value"]) == trial.value
            assert (
                row["config.moe_runner_backend"]
                == trial.user_attrs["config"]["moe_runner_backend"]
            )


def test_trials_json_to_a_file(synthetic, tuner, tmp_path: Path) -> None:
    out = tmp_path / "tables" / "trials.json"
    result = tuner("trials", str(GLM5), *_study_args(synthetic), "--json", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    rows = json.loads(out.read_text())
    assert [r["number"] for r in rows] == [t.number for t in synthetic.study.trials]
    pruned = next(r for r in rows if r["pruned_by"] == "constraint")
    assert (
        pruned["state"] == "PRUNED"
        and pruned["reason"].startswith("constraint:")
        and pruned["tps@64"] is None
    )
    assert rows[0]["emulated"] is True


def test_trials_with_both_formats_is_a_one_line_error(synthetic, tuner) -> None:
    result = tuner("trials", str(GLM5), *_study_args(synthetic), "--csv", "--json")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "--csv and --json" in result.stderr


def test_report_command_writes_the_page(synthetic, tuner, tmp_path: Path) -> None:
    out = tmp_path / "site" / "report.html"
    result = tuner("report", str(GLM5), *_study_args(synthetic), "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert f"wrote {out}" in result.stdout and "(emulated)" in result.stdout
    assert "<title>tuner report: glm5-synthetic (emulated)</title>" in out.read_text()


def test_missing_storage_names_what_exists(synthetic, tuner, tmp_path: Path) -> None:
    missing = synthetic.db.parent / "nothing.db"
    for command in ("report", "trials"):
        result = tuner(command, str(GLM5), "--storage", f"sqlite:///{missing}")
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1, result.stderr
        assert str(missing) in lines[0] and "synthetic.db" in lines[0]  # what exists beside it
    assert not missing.exists()  # reading never creates a database


def test_missing_study_names_the_studies_there(synthetic, tuner) -> None:
    result = tuner("report", str(GLM5), "--storage", synthetic.url)  # the YAML's name: glm5
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "'glm5'" in lines[0] and synthetic.name in lines[0]


def test_default_storage_of_an_emulated_study_when_none_ran(tuner, tmp_path: Path) -> None:
    result = tuner("trials", str(GLM5), "--emulate", "--json", cwd=tmp_path)
    assert result.returncode == 2
    assert (
        "studies/glm5-emulated.db" in result.stderr
        and len(result.stderr.strip().splitlines()) == 1
    )
