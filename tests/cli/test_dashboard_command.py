"""`tuner dashboard`: optuna-dashboard on the study's storage, worked out from the search space."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.dashboard import Dashboard, attrs_of, running_dashboard
from tests.support.study_factory import make_study
from tests.study.conftest import GLM5, emulated_study  # noqa: F401 (the fixture)
from tests.support.studies import QUICK
from tests.support.sshd import free_port


def test_dashboard_serves_the_emulated_study_of_a_space(tmp_path: Path) -> None:
    (tmp_path / "studies").mkdir()
    make_study(f"sqlite:///{tmp_path / 'studies' / 'glm5-emulated.db'}", study_name="glm5")
    port = free_port()
    dashboard = subprocess.Popen(
        [sys.executable, "-m", "tuner", "dashboard", str(GLM5), "--emulate", "--port", str(port)],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        client, document, deadline = Dashboard(port), None, time.monotonic() + 30
        while document is None and time.monotonic() < deadline:
            try:
                document = client.study("glm5")
            except OSError:
                time.sleep(0.3)
        assert document is not None, "the dashboard never answered"
        assert attrs_of(document)["emulated"] == "True"  # optuna-dashboard shows attributes as text
    finally:
        os.killpg(dashboard.pid, signal.SIGTERM)
        dashboard.wait(timeout=15)


def test_dashboard_without_a_study_is_a_one_line_error(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "tuner", "dashboard", str(GLM5), "--emulate"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "no study database" in done.stderr


def test_optuna_dashboard_opens_the_tuner_s_studies_as_typed(emulated_study) -> None:
    """`optuna-dashboard studies/glm5.db` and `... studies/glm5-emulated.db`, typed as the user
    types them in the folder the tuner ran in, open the studies the tuner wrote there."""
    run = emulated_study(name="glm5", workload__emulated=QUICK)
    run.optimize(1)  # the baseline, on the emulated host: studies/glm5-emulated.db
    run.run("enqueue", str(run.path), "--set=radix_cache=false")  # studies/glm5.db, no host time
    assert sorted(p.name for p in (run.dir / "studies").glob("*.db")) == ["glm5-emulated.db", "glm5.db"]
    with running_dashboard("studies/glm5-emulated.db", run.dir / "dash-emulated.log", cwd=run.dir) as dash:
        emulated = dash.study("glm5")
    assert attrs_of(emulated)["emulated"] == "True"
    baseline = {t["number"]: t for t in emulated["trials"]}[0]
    assert baseline["state"] == "Complete"
    assert baseline["values"] == [run.study().trials[0].value]
    with running_dashboard("studies/glm5.db", run.dir / "dash-real.log", cwd=run.dir) as dash:
        queued = dash.study("glm5")
    states = sorted(t["state"] for t in queued["trials"])
    assert states == ["Waiting", "Waiting"]  # the baseline and the configuration enqueued by hand


def test_an_sqlite_study_at_the_old_default_path_is_read_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "studies").mkdir()
    make_study(f"sqlite:///{tmp_path / 'studies' / 'glm5-emulated.db'}", study_name="glm5")
    done = subprocess.run([sys.executable, "-m", "tuner", "best", str(GLM5), "--emulate", "--json"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert '"trial"' in done.stdout
    note = done.stderr.strip().splitlines()
    assert len(note) == 1 and "SQLite" in note[0] and "sqlite:///studies/glm5-emulated.db" in note[0]
