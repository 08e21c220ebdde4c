"""A real optuna-dashboard on 127.0.0.1 for the tests, read through its HTTP API.

The server runs in its own process group and is stopped (the whole group) on every path. Its
JSON API: ``GET /api/studies`` lists studies (``study_summaries``, each with ``study_id``,
``study_name``, ``user_attrs`` as ``[{key, value}]``); ``GET /api/studies/<id>?after=0`` gives
the study with its ``trials`` (``number``, ``state``, ``user_attrs``, ``intermediate_values`` as
``[{step, value}]``). Attribute values are strings: text as is, numbers via ``str``, anything
else as JSON cut at 1,024 characters (optuna_dashboard/_serializer.py, ``MAX_ATTR_LENGTH``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from optuna.trial import TrialState

from tests.support.processes import stop_group
from tests.support.sshd import free_port
from tuner.study.record import level_figures


class Dashboard:
    """The address of a running dashboard and a JSON GET helper."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"

    def get(self, path: str) -> Any:
        """GET ``path`` and decode the JSON answer."""
        with urllib.request.urlopen(self.base + path, timeout=10) as response:
            return json.loads(response.read())

    def study(self, name: str) -> dict[str, Any]:
        """The detail document of the study called ``name``."""
        summaries = self.get("/api/studies")["study_summaries"]
        found = {s["study_name"]: s["study_id"] for s in summaries}
        assert name in found, f"dashboard lists {sorted(found)}, not {name!r}"
        return self.get(f"/api/studies/{found[name]}?after=0")


def attrs_of(document: dict[str, Any]) -> dict[str, str]:
    """``[{key, value}]`` as a dict."""
    return {a["key"]: a["value"] for a in document["user_attrs"]}


@contextmanager
def running_dashboard(
    storage_url: str, log: Path, timeout: float = 30.0, cwd: Path | None = None
) -> Iterator[Dashboard]:
    """Start ``optuna-dashboard STORAGE --host 127.0.0.1 --port P`` (in ``cwd``); stop it on exit."""
    executable = shutil.which("optuna-dashboard")
    assert executable, "optuna-dashboard is not installed (pip install optuna-dashboard)"
    port = free_port()
    with log.open("wb") as output:
        process = subprocess.Popen(
            [executable, storage_url, "--host", "127.0.0.1", "--port", str(port)],
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=cwd,
        )
    try:
        dashboard = Dashboard(port)
        deadline = time.monotonic() + timeout
        while True:
            try:
                dashboard.get("/api/studies")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError(
                        f"optuna-dashboard did not answer: {log.read_text()[-500:]}"
                    )
                time.sleep(0.2)
        yield dashboard
    finally:
        stop_group(process)


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
