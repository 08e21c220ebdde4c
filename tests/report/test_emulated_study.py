"""A real study on the emulated host (`tuner optimize --emulate`), then read as a user reads it:
the report in headless Chromium, `tuner trials --json`, and optuna-dashboard's API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support.browser import inspect_page
from tests.support.processes import group_members
from tests.support.studies import re_runs
from tests.support.dashboard import check_dashboard_shows_study
from tests.study.conftest import EmulatedStudy
from tuner.report import FIGURE_COUNT
from tuner.study.record import level_figures

# A small emulated workload, so that six trials take well under a minute.
SMALL = {
    "levels": [64, 256, 512],
    "output_len": 32,
    "requests_per_level": {"per_concurrency": 1, "min": 64},
    "time_scale": 200,
}
TRIALS = 6


def _optimize(run: EmulatedStudy, timeout: float = 400) -> None:
    """`tuner optimize` in its own process group; Ctrl-C (then SIGKILL) if it overruns."""
    command = [
        sys.executable,
        "-m",
        "tuner",
        "optimize",
        str(run.path),
        "--trials",
        str(TRIALS),
        "--emulate",
        "--port",
        str(run.port),
        "--seed",
        "7",
    ]
    log = run.dir / "optimize.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            command,
            cwd=run.dir,
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)  # the tuner stops its server and reverts patches
        try:
            process.wait(timeout=60)
        finally:
            if group_members(process.pid):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        raise AssertionError(f"tuner optimize overran {timeout} s:\n{log.read_text()[-2000:]}")
    assert code == 0, log.read_text()[-3000:]


@pytest.fixture(scope="module")
def emulated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatedStudy]:
    """Six trials of glm5.yaml (baseline first) on the emulator, in SQLite under a temp folder."""
    run = EmulatedStudy(
        tmp_path_factory.mktemp("emulated"), name="glm5r", workload__emulated=SMALL
    )
    _optimize(run)
    yield run


def _tuner(run: EmulatedStudy, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tuner", *args],
        cwd=run.dir,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.mark.browser
def test_report_of_an_emulated_study_in_chromium(emulated, chromium) -> None:
    out = emulated.dir / "report.html"
    result = _tuner(emulated, "report", str(emulated.path), "--emulate", "--out", str(out))
    assert result.returncode == 0, result.stderr
    seen = inspect_page(out, emulated.dir / "chromium", FIGURE_COUNT)
    assert seen.errors == []
    assert seen.drawn == seen.figures == FIGURE_COUNT
    assert seen.title == "tuner report: glm5r (emulated)"
    assert seen.external_requests == []


def test_trials_json_of_an_emulated_study(emulated) -> None:
    result = _tuner(emulated, "trials", str(emulated.path), "--emulate", "--json")
    assert result.returncode == 0, result.stderr
    rows = {r["number"]: r for r in json.loads(result.stdout)}
    study = emulated.study()
    assert sorted(rows) == [t.number for t in study.trials] and len(rows) + re_runs(study) >= TRIALS
    assert rows[0]["is_baseline"] is True
    for trial in study.trials:
        row = rows[trial.number]
        assert row["state"] == trial.state.name
        assert row["reason"] == (
            trial.user_attrs.get("failure_reason") or trial.user_attrs.get("pruned_reason")
        )
        for level in trial.user_attrs.get("levels", []):
            for key, value in level_figures(level).items():
                assert row[key] == value, (trial.number, key)
        for name, value in trial.user_attrs.get("config", {}).items():
            assert row[f"config.{name}"] == ("unset" if value is None else value)


def test_dashboard_shows_an_emulated_study(emulated) -> None:
    check_dashboard_shows_study(emulated.storage, emulated.name, emulated.dir / "dashboard.log")
