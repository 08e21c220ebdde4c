"""`tuner dashboard`: optuna-dashboard on the study's storage, worked out from the search space."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.report.dashboard import Dashboard, attrs_of
from tests.report.study_factory import make_study
from tests.study.conftest import GLM5
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
