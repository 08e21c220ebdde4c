"""A server that answers /health 200 and dies at its first request, as ``transformers serve`` did on
the H200 (its batching worker starts then): the trial is the configuration's failure by its real
cause, out of memory or a crash, never ``wrong-output``.

The stand-in (tests/support/strict_openai_server.py, ``--die-at-first-request``) answers every
generation request with the status the H200 server gave and prints the log the H200 server wrote
(tests/fixtures/transformers/h200-*.log) a moment after its first answer, as the real one did:
the probe's request fails before the log says why. Before the probe waited for the watcher, all
three were ``wrong-output`` (``probe request failed: ... answered HTTP 503``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from tests.support.sshd import free_port
from tuner.study.storage import open_storage

REPO = Path(__file__).resolve().parents[2]
STRICT_SERVER = REPO / "tests/support/strict_openai_server.py"
FIXTURES = REPO / "tests/fixtures/transformers"


def _baseline_outcome(tmp_path: Path, stand_in_flags: dict) -> optuna.trial.FrozenTrial:
    document = yaml.safe_load((REPO / "search_spaces/transformers-h200.yaml").read_text())
    document["host"] = {"address": "local", "run_root": str(tmp_path / "runs")}
    server = document["server"]
    server["command"] = f"{sys.executable} {STRICT_SERVER}"
    server["port"] = free_port()
    server["flags"].update(stand_in_flags)
    document["timeouts"] = {"start_s": 30, "ready_s": 60, "level_s": 60, "stop_grace_s": 5,
                            "probe_s": 30}
    document["workload"].update(levels=[1], input_len=8, output_len=4, warmup=0,
                                requests_per_level={"per_concurrency": 2, "min": 2})
    space = tmp_path / "dies.yaml"
    space.write_text(yaml.safe_dump(document, sort_keys=False))
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "optimize", str(space), "--trials", "1", "--skip-doctor"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
        env={**os.environ, "TUNER_MODEL_DIR": str(tmp_path / "model"), "HOME": str(home)},
        check=False)
    assert "FAIL trial 0" in done.stdout + done.stderr, done.stdout[-2000:] + done.stderr[-2000:]
    study = optuna.load_study(study_name="transformers-h200",
                              storage=open_storage(str(tmp_path / "studies" / "dies.db")))
    (trial,) = study.get_trials()
    assert trial.state == TrialState.FAIL
    return trial


@pytest.mark.parametrize(
    ("status", "log", "reason", "detail"),
    [
        (503, "h200-footprint.log", "oom-at-start",
         "MemoryError: Memory footprint 350242734080 is more than available memory"),
        (500, "h200-flex-attention.log", "startup-crash",
         'ValueError: Specified `attn_implementation="paged|flex_attention"` is not supported'),
        (503, None, "startup-crash", "the server failed its first request"),
    ],
    ids=["kv-cache-does-not-fit", "no-paged-flex-attention", "503-and-a-silent-log"],
)
def test_a_server_that_dies_at_its_first_request_fails_by_its_cause(
        tmp_path: Path, status: int, log: str | None, reason: str, detail: str) -> None:
    flags: dict = {"--die-at-first-request": status}
    if log is not None:
        flags["--die-log"] = str(FIXTURES / log)
    trial = _baseline_outcome(tmp_path, flags)
    assert trial.user_attrs["failure_reason"] == reason, trial.user_attrs
    assert detail in trial.user_attrs["failure_detail"], trial.user_attrs["failure_detail"]
