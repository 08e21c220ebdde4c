"""A whole study of search_spaces/transformers-h200.yaml on this machine, the server replaced by the
strict OpenAI stand-in (tests/support/strict_openai_server.py: transformers serve's command line
and manners, no GPU): the model comes from ``$TUNER_MODEL_DIR``, the requests carry no extension,
the streams end without ``[DONE]``, and replies that end early are counted, never taken as full."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import yaml
from optuna.trial import TrialState

from tests.support.sshd import free_port
from tests.support.studies import re_runs
from tuner.study.storage import open_storage

REPO = Path(__file__).resolve().parents[2]
STRICT_SERVER = REPO / "tests/support/strict_openai_server.py"


def test_a_study_measures_a_strict_openai_server(tmp_path: Path) -> None:
    document = yaml.safe_load((REPO / "search_spaces/transformers-h200.yaml").read_text())
    document["host"] = {"address": "local", "run_root": str(tmp_path / "runs")}
    server = document["server"]
    server["command"] = f"{sys.executable} {STRICT_SERVER}"
    server["port"] = free_port()
    server["flags"]["--stop-early-every"] = 6  # the stand-in's: every 6th reply ends early
    server["flags"]["--itl-ms"] = 20  # slow enough for a busy client machine to keep up
    document["timeouts"] = {"start_s": 30, "ready_s": 60, "level_s": 60, "stop_grace_s": 5,
                            "probe_s": 30}
    document["workload"].update(levels=[1, 4], input_len=16, output_len=8, warmup=2,
                                requests_per_level={"per_concurrency": 3, "min": 6})
    space = tmp_path / "strict.yaml"
    space.write_text(yaml.safe_dump(document, sort_keys=False))
    model_dir = str(tmp_path / "model")
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "optimize", str(space), "--trials", "3", "--seed", "1",
         "--skip-doctor"],  # the stand-in has no `transformers serve --help`, no engine to import
        cwd=tmp_path, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
        env={**os.environ, "TUNER_MODEL_DIR": model_dir, "HOME": str(home)}, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    study = optuna.load_study(study_name="transformers-h200",
                              storage=open_storage(str(tmp_path / "studies" / "strict.db")))
    trials = study.get_trials()
    assert len(trials) + re_runs(study) >= 3 and not [t for t in trials if t.state == TrialState.FAIL], [
        (t.number, t.user_attrs.get("failure_reason"), t.user_attrs.get("failure_detail"))
        for t in trials]
    baseline = trials[0]
    assert baseline.state == TrialState.COMPLETE and baseline.value > 0
    assert baseline.user_attrs["command_line"].startswith(
        f"{sys.executable} {STRICT_SERVER} {model_dir} --host 127.0.0.1")
    assert len(baseline.user_attrs["probe_outputs"]) == 3 and all(baseline.user_attrs["probe_outputs"])
    for trial in (t for t in trials if t.state == TrialState.COMPLETE):
        for level in trial.user_attrs["levels"]:
            asked = level["completed"] * 8
            assert level["failed"] == 0 and level["stop_reason"] is None
            assert level["completed"] == max(6, 3 * level["concurrency"])
            assert level["short_replies"] >= 1  # every 6th of the server's replies
            # 3 tokens for each short reply, never the 8 asked
            assert level["output_tokens"] == asked - 5 * level["short_replies"]
