"""Whole studies on the emulated GLM-5 host, through the `tuner` command as a user runs it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.study.conftest import N_OFF, N_ON, EmulatedStudy
from tests.support.studies import QUICK, SMALL, emulator_pids, signalled, study_trials, tuner_with_a_server
from tuner.study.record import repeats_of

@pytest.fixture(scope="module")
def seeds_winner_twice(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[EmulatedStudy, subprocess.CompletedProcess[str]]:
    """The baseline, then N-on enqueued twice, in a run of 4 trials (the baseline, N-on, a sampled
    one, and the winner's re-run; the copy of N-on is free): run once for the tests that only
    read it (the study and the run's output); none of them runs the tuner on it again."""
    run = EmulatedStudy(tmp_path_factory.mktemp("seeds-winner"), workload__emulated=SMALL)
    run.enqueue(N_ON)
    run.enqueue(N_ON)
    return run, run.optimize(4)


def test_baseline_first_and_the_seeds_winner_completes(seeds_winner_twice) -> None:
    run, _ = seeds_winner_twice
    trials = study_trials(run.study())
    assert trials[0].user_attrs["is_baseline"] is True
    assert trials[0].state == TrialState.COMPLETE
    assert trials[1].user_attrs["config"]["moe_runner_backend"] == "flashinfer_cutlass"
    # N-on is slower than the baseline at 64 concurrent requests, much faster later: never pruned.
    assert trials[1].state == TrialState.COMPLETE, trials[1].user_attrs
    assert trials[1].value > 1.5 * trials[0].value
    levels = {lv["concurrency"]: lv for lv in trials[1].user_attrs["levels"]}
    assert set(levels) == {64, 256, 512}
    assert all(lv["emulated"] for lv in levels.values())
    for key in ("command_line", "env", "engine_version", "ready_s", "host_seconds"):
        assert key in trials[1].user_attrs, key
    assert "--moe-runner-backend flashinfer_cutlass" in trials[1].user_attrs["command_line"]



def test_emulated_host_time_is_what_a_host_would_spend_plus_the_tuners_own_time(seeds_winner_twice) -> None:
    # issue 39, 6: the emulated start-up and levels (host seconds) plus the tuner's own work at
    # its real duration, not the whole wall time multiplied by the time scale (K=50 here)
    run, _ = seeds_winner_twice
    ran = [trial for trial in study_trials(run.study()) if "ready_s" in trial.user_attrs]
    assert ran
    for trial in ran:
        ua = trial.user_attrs
        emulated = ua["ready_s"] + sum(level["duration_s"] for level in ua["levels"])
        assert ua["ready_s"] > 150  # 83 shards, 2 minutes of KV and warm-up, graph capture
        own = ua["host_seconds"] - emulated
        assert 0 <= own < 60, (ua["host_seconds"], emulated)  # wall seconds, not x50

def test_identical_configuration_is_reused_not_rerun(seeds_winner_twice) -> None:
    run, result = seeds_winner_twice
    trials = study_trials(run.study())
    assert [t.user_attrs.get("reused_from") for t in trials[:3]] == [None, None, 1]
    assert trials[2].state == TrialState.COMPLETE and trials[2].value == trials[1].value
    assert "reused" in result.stderr
    # No server was started for the reused trial, and it did not use the budget of 4: the
    # configurations started and the winner's re-run (none when no trial ran every level clean)
    # fill it.
    runs = run.dir / "studies" / "glm5t-emulated.host" / "runs" / "glm5t"
    started = sorted(p.name for p in runs.iterdir() if p.name.startswith("trial-"))
    assert "trial-0002" not in started and started[:2] == ["trial-0000", "trial-0001"], started
    repeats = repeats_of(run.study().user_attrs)
    assert len(started) + sum(len(r["values"]) - 1 + len(r["failed"]) for r in repeats.values()) == 4


def _crash_seconds(trial: optuna.trial.FrozenTrial) -> float:
    """Seconds between the server's last log write (its crash) and the tuner noticing it."""
    log = Path(trial.user_attrs["log_file"])
    assert log.is_file()
    return trial.user_attrs["failure_noticed_at"] - trial.user_attrs["server_log_mtime"]


def test_crash_under_load_fails_with_its_reason_on_the_first_level(emulated_study) -> None:
    # Two waves at K=20, as in the calibration workload: 512 requests are really in flight at once.
    run = emulated_study(workload__emulated={**SMALL, "time_scale": 20,
                                             "requests_per_level": {"per_concurrency": 2, "min": 128}})
    run.enqueue(N_OFF)
    run.optimize(2)
    trial = study_trials(run.study())[1]
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["failure_reason"] == "unstable-at-512"
    assert "PrefillMetadata" in trial.user_attrs["failure_excerpt"]
    detail = trial.user_attrs["failure_detail"]  # the cause, not "Scheduler hit an exception"
    assert detail.startswith(
        "crash: AttributeError: 'PrefillMetadata' object has no attribute"), detail
    kept = [lv["concurrency"] for lv in trial.user_attrs["levels"]]
    # Levels run from the top down: the crash at 512 is found first, no host time on 256 and 64;
    # the crashed level is kept with its stop reason.
    assert kept == [512] and trial.user_attrs["levels"][0]["stop_reason"]
    assert _crash_seconds(trial) < 5.0  # a few polls of the log, not a timeout (2.3 s seen at load 4)


def test_out_of_memory_at_start_fails_fast(emulated_study) -> None:
    run = emulated_study(workload__emulated=SMALL, constraints=[])
    run.enqueue({"mem_fraction_static": 0.96})
    started = time.monotonic()
    run.optimize(2)
    trial = study_trials(run.study())[1]
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["failure_reason"] == "oom-at-start"
    assert "out of memory" in trial.user_attrs["failure_excerpt"].lower()
    assert "levels" not in trial.user_attrs or trial.user_attrs["levels"] == []
    assert _crash_seconds(trial) < 5.0  # a few polls of the log, not a timeout (2.3 s seen at load 4)
    assert time.monotonic() - started < 120


def test_constraint_skips_without_host_time(emulated_study) -> None:
    run = emulated_study(workload__emulated=QUICK)
    run.enqueue({"mem_fraction_static": 0.96})
    run.optimize(2)
    trials = study_trials(run.study())
    skipped = trials[1]
    assert skipped.state == TrialState.PRUNED
    assert skipped.user_attrs["pruned_reason"].startswith("constraint: out of memory at start")
    assert "run_dir" not in skipped.user_attrs  # no server was started for it


def test_wrong_output_is_caught_by_the_probe(emulated_study) -> None:
    run = emulated_study(workload__emulated=QUICK)
    run.enqueue({"attention_backend": "fa3"})
    run.optimize(2)
    trial = study_trials(run.study())[1]
    assert trial.state == TrialState.FAIL
    assert trial.user_attrs["failure_reason"] == "wrong-output"
    assert trial.user_attrs["probe_outputs"] != study_trials(run.study())[0].user_attrs["probe_outputs"]


def test_a_failed_baseline_stops_the_run_before_anything_is_left_unchecked(emulated_study) -> None:
    """Without the baseline's probe outputs no other configuration can be checked (fa3's garbage
    would pass): the run stops after the baseline's failure, naming it, and runs nothing else."""
    run = emulated_study(workload__emulated=QUICK, baseline__mem_fraction_static=0.96)
    run.enqueue({"attention_backend": "fa3", "mem_fraction_static": 0.92})
    result = run.optimize(3, check=False)
    assert result.returncode == 1, result.stdout + result.stderr
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith("tuner: error: no probe reference: baseline trial 0 ended FAIL (oom-at-start)")
    assert "fix:" in error
    trials = study_trials(run.study())
    assert [t.state for t in trials if t.state != TrialState.WAITING] == [TrialState.FAIL]
    assert not any(t.user_attrs.get("config", {}).get("attention_backend") == "fa3" for t in trials)


def test_changed_search_space_is_refused_on_resume(emulated_study) -> None:
    run = emulated_study(workload__emulated=QUICK)
    run.optimize(1)
    text = run.path.read_text().replace("input_len: 256", "input_len: 512")
    assert text != run.path.read_text()
    run.path.write_text(text)
    refused = run.optimize(1, check=False)
    assert refused.returncode == 2
    assert "changed since it was created" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    resumed = run.optimize(1, "--allow-changed", check=False)
    assert resumed.returncode == 0, resumed.stderr


def test_secret_never_reaches_the_database_or_the_export(emulated_study) -> None:
    run = emulated_study(workload__emulated=QUICK,
                         server__env={"PYTHONUNBUFFERED": "1", "HF_TOKEN": "${HF_TOKEN}"})
    secret = "hf_s3cr3t-value-never-stored"
    run.optimize(1, env={"HF_TOKEN": secret})
    assert secret.encode() not in run.db.read_bytes()
    script = run.dir / "launch.sh"
    run.run("export", str(run.path), "--emulate", "--out", str(script))
    text = script.read_text()
    assert secret not in text
    assert "${HF_TOKEN:?" in text


def test_ctrl_c_leaves_no_server_and_the_study_resumes(emulated_study) -> None:
    run = emulated_study(workload__emulated={**SMALL, "time_scale": 20})
    tuner = tuner_with_a_server(run, "optimize", str(run.path), "--trials", "3", "--emulate",
                                "--port", str(run.port), "--seed", "7")
    code, output = signalled(tuner, signal.SIGINT)
    assert code == 130, output
    assert emulator_pids(run.port) == []
    trials = study_trials(run.study())
    assert trials[-1].state == TrialState.FAIL
    assert trials[-1].user_attrs["failure_reason"] == "interrupted"
    run.optimize(1, "--skip-doctor")
    after = study_trials(run.study())
    assert any(t.state == TrialState.COMPLETE and t.user_attrs.get("is_baseline") for t in after)


def test_export_starts_the_emulator_until_ready(emulated_study) -> None:
    run = emulated_study(workload__emulated=SMALL)
    run.enqueue(N_ON)
    run.optimize(2)
    script = run.dir / "launch.sh"
    run.run("export", str(run.path), "--emulate", "--out", str(script), "--port", str(run.port))
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash")
    assert "set -euo pipefail" in text and "EMULATED" in text
    assert "--moe-runner-backend flashinfer_cutlass" in text
    done = subprocess.run(["bash", str(script)], cwd=run.dir, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHON": sys.executable, "TUNER_EXIT_WHEN_READY": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "server ready" in done.stdout
    assert "patch autotune_gate: applied" in done.stdout
    assert emulator_pids(run.port) == []


def test_warm_start_queues_an_earlier_studys_best(emulated_study, tmp_path: Path) -> None:
    from tests.support.study_factory import make_study

    earlier = tmp_path / "k2-thinking.db"
    make_study(f"sqlite:///{earlier}", study_name="earlier")
    run = emulated_study(workload__emulated=QUICK)
    result = run.optimize(1, "--warm-start", str(earlier))
    assert "warm start: queued" in result.stderr
    queued = [t for t in study_trials(run.study()) if "warm_start_from" in t.user_attrs]
    assert queued and all(t.state == TrialState.WAITING for t in queued)
