"""A real inference engine: vLLM on this machine's CPU, tuned through the SSH host layer.

The test builds a tiny random-weight Llama offline and runs 6 trials over a real sshd on
127.0.0.1 with a fixed seed, the default (guided) strategy: 5 configurations, and the best of them
run a second time (the winner is always re-measured, ``WINNER_RUNS``). Nothing is queued: the baseline runs
``--max-num-seqs 2`` under levels of 8 and 32 streams, and vLLM's ``/metrics`` (served by
default: ``vllm:num_requests_running`` at 2 through every level) says the cap binds; the
strategy's first move raises it, its reason naming the source (issue 28 point 4: the cap found
from metrics, whatever the log prints). It installs nothing: ``.ci/install`` builds the venv.
"""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.real_engine.conftest import run_tuner, space_on
from tests.support.sshd import free_port
from tests.support.studies import re_runs

pytestmark = [pytest.mark.vllm, pytest.mark.sshd, pytest.mark.timeout(1800)]


def test_tuner_finds_a_faster_vllm_configuration(tiny_model: Path, sshd, tmp_path: Path) -> None:
    space = space_on(tmp_path, "vllm-cpu-tiny.yaml", tiny_model, free_port())
    storage = f"sqlite:///{tmp_path / 'vllm.db'}"
    common = ["--storage", storage]
    run_tuner("optimize", str(space), "--trials", "6", "--seed", "11", *common,
              "--host", f"{sshd.user}@127.0.0.1:{sshd.port}", "--ssh-key", sshd.key_path,
              "--known-hosts", sshd.known_hosts_path, cwd=tmp_path, timeout=1700)

    study = optuna.load_study(study_name="vllm-cpu-tiny", storage=storage)
    # the trials that ran a server (not those settled without running: a constraint, the
    # feasibility gate after a failure, a reused result)
    ran = [t for t in study.get_trials() if t.user_attrs.get("reused_from") is None
           and "command_line" in t.user_attrs]
    assert len(ran) >= 5
    assert len(ran) + re_runs(study) == 6
    assert re_runs(study), "the winner was not re-measured"
    completed = [t for t in ran if t.state == TrialState.COMPLETE]
    assert len(completed) >= 2
    values = [t.value for t in completed]
    assert max(values) >= 1.5 * min(values), values
    baseline, first_move = ran[0], ran[1]
    assert baseline.user_attrs["config"]["max_num_seqs"] == 2
    assert baseline.user_attrs["observation_sources"]["running_req_max"] == "metrics"
    reason = first_move.user_attrs["chosen_by"]
    assert reason.startswith("rule: cap binds at 2") and reason.endswith("(metrics)"), reason
    assert first_move.user_attrs["config"]["max_num_seqs"] > 2
    if first_move.state == TrialState.COMPLETE and baseline.state == TrialState.COMPLETE:
        # The raised cap (2 -> 4) pays, but by how much swings with the CPU's other load: CI
        # measured 1.47x (893 -> 1,312 tok/s) and 1.21x (720 -> 873); a busy 2-core machine here
        # 2.3x (412 -> 945). The bar is above one run's spread of an idle run (a few percent); the
        # study's best against its worst keeps the 1.5x bar above.
        assert first_move.value >= 1.1 * baseline.value, (baseline.value, first_move.value)
    for trial in ran:
        assert "--max-num-seqs" in trial.user_attrs["command_line"]
        assert trial.user_attrs["log_excerpt"], trial.number
        assert trial.user_attrs["host"] == f"{sshd.user}@127.0.0.1:{sshd.port}"
        if trial.state == TrialState.COMPLETE:
            assert trial.user_attrs["levels"] and all(not lv["emulated"] for lv in trial.user_attrs["levels"])
    table = run_tuner("trials", str(space), *common, "--csv", cwd=tmp_path, timeout=60).stdout
    assert len(table.strip().splitlines()) == len(study.get_trials()) + 1
    print(table)  # `pytest -s` shows the measured table (README: "A real engine")
