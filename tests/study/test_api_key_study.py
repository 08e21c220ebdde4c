"""A whole emulated study on a server that enforces its ``--api-key``, and no key kept anywhere.

The emulator answers 401 without ``Authorization: Bearer KEY`` on every endpoint but
``/health`` and logs ``server_args=ServerArgs(... api_key='KEY' ...)`` at start, as SGLang 0.5.9
does. The study's baseline must complete (the probe and the load generator send the key), and
neither the study storage nor the logs copied to ``studies/runs/`` may hold the key: the host's
own log does (the server printed it there), which shows the copies were scrubbed, not empty.
"""

from __future__ import annotations

import stat
from pathlib import Path

import yaml
from optuna.trial import TrialState

from tests.study.conftest import GLM5
from tests.support.studies import QUICK

API_KEY = "sk-study-test-91c0ffee"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_study_with_the_api_key_set_completes_and_stores_no_key(emulated_study) -> None:
    flags = {**yaml.safe_load(GLM5.read_text())["server"]["flags"],
             "--api-key": "${TUNER_TEST_API_KEY}"}
    run = emulated_study(workload__emulated=QUICK, server__flags=flags, constraints=[])
    run.enqueue({"mem_fraction_static": 0.96})  # out of memory at start: a failure stored too
    done = run.optimize(2, env={"TUNER_TEST_API_KEY": API_KEY})
    baseline, crashed = run.study().get_trials(deepcopy=False)
    assert baseline.state == TrialState.COMPLETE, baseline.user_attrs
    assert baseline.user_attrs["levels"] and "failure_reason" not in baseline.user_attrs
    assert crashed.state == TrialState.FAIL
    assert crashed.user_attrs["failure_reason"] == "oom-at-start"
    assert "--api-key '${TUNER_TEST_API_KEY}'" in baseline.user_attrs["command_line"]

    studies = run.dir / "studies"
    host = studies / f"{run.name}-emulated.host"
    kept = [p for p in studies.rglob("*") if p.is_file() and host not in p.parents]
    copies = sorted(p for p in kept if p.parent.name == run.name and p.suffix == ".log")
    assert [p.name for p in copies] == ["trial-0000.log", "trial-0001.log"]
    assert all("api_key='***'" in p.read_text() and _mode(p) == 0o600 for p in copies)
    assert run.db in kept
    for path in kept:
        assert API_KEY.encode() not in path.read_bytes(), path
    assert API_KEY not in done.stdout + done.stderr

    trial_dirs = sorted((host / "runs" / run.name).glob("trial-*"))
    assert len(trial_dirs) == 2
    for folder in trial_dirs:  # the server's own log holds what it printed: the key
        assert f"api_key='{API_KEY}'" in (folder / "server.log").read_text()
        assert _mode(folder) == 0o700 and _mode(folder / "server.log") == 0o600
        assert not (folder / "secret-flags.yaml").exists()
