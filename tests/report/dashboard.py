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

from tests.report.processes import stop_group
from tests.support.sshd import free_port


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
