"""Whole studies over a real OpenSSH server on 127.0.0.1, against the emulated host.

Faults are made for real: the server SIGKILLed by its PID during a level, the SSH connection
dropped, the tuner itself SIGKILLed and started again, a changed host key, a patch target whose
text is not what the patch expects, a flag the installed version lacks, a busy GPU.
"""

from __future__ import annotations

import hashlib
import shlex
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from optuna.trial import TrialState

from tests.study.conftest import N_ON, REPO, EmulatedStudy
from tests.support.studies import (GATE_FILE, QUICK, SLOW, STANDIN_GATE, emulator_pids, optimize_over_ssh,
                                   ssh_args, study_trials)
from tests.support.sshd import free_port

pytestmark = pytest.mark.sshd

def _wait_until_measuring(run, trial_number: int, timeout: float = 300) -> None:
    """Wait until the trial measures its first level (the top one: levels run from the top down):
    its probe passed, and a second more."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if run.db.exists():
            try:
                trials = study_trials(run.study())
            except Exception:  # the study is being created
                trials = []
            if len(trials) > trial_number and "probe_outputs" in trials[trial_number].user_attrs:
                time.sleep(1.0)
                return
        time.sleep(0.1)
    raise AssertionError(f"trial {trial_number} never began measuring")


def _server_pid(run, trial_number: int) -> int:
    pid_file = run.dir / "studies" / f"{run.name}-emulated.host" / "runs" / run.name / f"trial-{trial_number:04d}" / "server.pid"
    return int(pid_file.read_text().split()[0])


def _finish(tuner: subprocess.Popen[str], timeout: float = 120) -> str:
    try:
        output, _ = tuner.communicate(timeout=timeout)
        return output
    finally:
        if tuner.poll() is None:
            os.killpg(tuner.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def baseline_over_ssh(tmp_path_factory: pytest.TempPathFactory, sshd) -> EmulatedStudy:
    """A study of one trial (the baseline) run over the sshd: run once for the tests that only
    read it or export it (an exported script runs beside it, in its own folder's host root)."""
    run = EmulatedStudy(tmp_path_factory.mktemp("over-ssh"), workload__emulated=QUICK)
    run.optimize(1, *ssh_args(sshd))
    return run


def test_study_over_ssh_records_the_host(baseline_over_ssh, sshd) -> None:
    run = baseline_over_ssh
    baseline = study_trials(run.study())[0]
    assert baseline.state == TrialState.COMPLETE
    assert baseline.user_attrs["host"] == f"{sshd.user}@127.0.0.1:{sshd.port}"
    assert Path(baseline.user_attrs["log_file"]).read_text().count("The server is fired up") == 1


def test_server_sigkilled_during_a_level_fails_the_trial(emulated_study, sshd) -> None:
    run = emulated_study(workload__emulated=SLOW)
    run.enqueue(N_ON)
    tuner = optimize_over_ssh(run, sshd, 2)
    try:
        _wait_until_measuring(run, 1)
        killed_at = time.time()
        os.killpg(_server_pid(run, 1), signal.SIGKILL)  # the server's own process group
        output = _finish(tuner)
    finally:
        if tuner.poll() is None:
            os.killpg(tuner.pid, signal.SIGKILL)
    assert tuner.returncode == 0, output
    trial = study_trials(run.study())[1]
    assert trial.state == TrialState.FAIL
    # Levels run from the top down: the kill lands in the first one measured, 512.
    assert trial.user_attrs["failure_reason"] == "unstable-at-512"
    assert trial.user_attrs["failure_noticed_at"] - killed_at < 2.0
    assert [lv["concurrency"] for lv in trial.user_attrs["levels"]] == [512]
    assert emulator_pids(run.port) == []


def test_ssh_connection_dropped_during_a_trial(emulated_study, sshd) -> None:
    run = emulated_study(workload__emulated=SLOW)
    run.enqueue(N_ON)
    tuner = optimize_over_ssh(run, sshd, 2)
    try:
        _wait_until_measuring(run, 1)
        assert sshd.drop_connections() >= 1
        output = _finish(tuner, timeout=180)
    finally:
        if tuner.poll() is None:
            os.killpg(tuner.pid, signal.SIGKILL)
    trials = study_trials(run.study())
    trial = trials[1]
    assert trial.state == TrialState.FAIL, output
    assert trial.user_attrs["failure_reason"] == "host-error"
    assert emulator_pids(run.port) == []  # its server was stopped after reconnecting


def test_tuner_sigkilled_and_restarted_leaves_the_host_as_it_was(emulated_study, sshd) -> None:
    run = emulated_study(workload__emulated=SLOW)
    run.enqueue(N_ON)  # needs the autotune gate patch
    tuner = optimize_over_ssh(run, sshd, 2)
    gate = run.dir / "studies" / f"{run.name}-emulated.host" / GATE_FILE
    try:
        _wait_until_measuring(run, 1)
        assert gate.read_bytes() != STANDIN_GATE.read_bytes()  # patched while trial 1 runs
        os.kill(tuner.pid, signal.SIGKILL)  # the tuner alone: its server survives as an orphan
        tuner.communicate(timeout=30)
    finally:
        if tuner.poll() is None:
            os.killpg(tuner.pid, signal.SIGKILL)
    orphans = emulator_pids(run.port)
    assert orphans, "the orphan server should still be running"
    completed_before = study_trials(run.study())[0]
    run.optimize(1, *ssh_args(sshd))
    assert emulator_pids(run.port) == []
    assert gate.read_bytes() == STANDIN_GATE.read_bytes()  # restored byte for byte
    trials = study_trials(run.study())
    assert trials[0].state == TrialState.COMPLETE and trials[0].value == completed_before.value
    assert trials[1].state == TrialState.FAIL
    assert trials[1].user_attrs["failure_reason"] == "worker-died"


def test_changed_host_key_is_refused(emulated_study, sshd, tmp_path: Path) -> None:
    run = emulated_study(workload__emulated=QUICK)
    other = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    known = tmp_path / "known_hosts"
    key_type, key = Path(f"{other}.pub").read_text().split()[:2]
    known.write_text(f"[127.0.0.1]:{sshd.port} {key_type} {key}\n")
    args = ["--host", f"{sshd.user}@127.0.0.1:{sshd.port}", "--ssh-key", sshd.key_path,
            "--known-hosts", str(known)]
    refused = run.optimize(1, *args, check=False)
    assert refused.returncode == 1
    assert "host key" in refused.stderr.lower()
    assert not run.db.exists() or study_trials(run.study()) == []


def test_patch_target_with_unexpected_content_is_never_written(emulated_study, sshd) -> None:
    run = emulated_study(workload__emulated=QUICK)
    from tuner.emulator.host_root import prepare_host_root

    prepare_host_root((run.dir / "studies" / f"{run.name}-emulated.host").resolve())
    gate = run.dir / "studies" / f"{run.name}-emulated.host" / GATE_FILE
    upstream = gate.read_text().replace('# "flashinfer_cutlass",', '"flashinfer_cutlass",  # on upstream')
    gate.write_text(upstream)
    digest = hashlib.sha256(gate.read_bytes()).hexdigest()
    run.enqueue(N_ON)
    result = run.optimize(2, *ssh_args(sshd))
    assert "autotune_gate" in result.stderr
    trials = study_trials(run.study())
    n_on = trials[1]
    assert n_on.state == TrialState.PRUNED
    assert "patch autotune_gate does not apply" in n_on.user_attrs["pruned_reason"]
    assert hashlib.sha256(gate.read_bytes()).hexdigest() == digest


def test_doctor_catches_a_flag_the_installed_version_lacks(emulated_study, sshd) -> None:
    params = yaml.safe_load((REPO / "search_spaces/glm5.yaml").read_text())["parameters"]
    params["imaginary"] = {"kind": "store_true", "flag": "--enable-imaginary-kernels"}
    baseline = yaml.safe_load((REPO / "search_spaces/glm5.yaml").read_text())["baseline"]
    run = emulated_study(workload__emulated=QUICK, parameters=params,
                         baseline={**baseline, "imaginary": False})
    result = run.run("doctor", str(run.path), "--emulate", "--port", str(run.port), *ssh_args(sshd), check=False)
    assert result.returncode == 1
    assert "FAIL flags known" in result.stdout
    assert "--enable-imaginary-kernels is unknown" in result.stdout


def test_doctor_catches_a_gpu_busy_with_a_foreign_process(emulated_study, sshd) -> None:
    run = emulated_study(workload__emulated=QUICK)
    from tuner.emulator.host_root import prepare_host_root

    env = prepare_host_root((run.dir / "studies" / f"{run.name}-emulated.host").resolve())
    foreign_port = free_port()
    foreign = subprocess.Popen(
        [sys.executable, "-m", "tuner.emulator", "--model-path", "/models/other", "--port", str(foreign_port),
         "--tp-size", "8", "--quantization", "modelopt_fp4", "--trust-remote-code",
         "--mem-fraction-static", "0.92", "--time-scale", "200"],
        env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        state = Path(env["TUNER_EMULATOR_STATE"])
        deadline = time.monotonic() + 30
        while not list(state.glob("*.json")) and time.monotonic() < deadline:
            time.sleep(0.1)
        result = run.run("doctor", str(run.path), "--emulate", "--port", str(run.port), *ssh_args(sshd), check=False)
    finally:
        os.killpg(foreign.pid, signal.SIGKILL)
        foreign.wait(timeout=10)
    assert result.returncode == 1
    assert "FAIL gpus idle" in result.stdout
    assert f"PID {foreign.pid}" in result.stdout


def test_shell_metacharacters_reach_the_server_unchanged(tmp_path: Path, sshd) -> None:
    from tuner.emulator.host_root import prepare_host_root

    env = prepare_host_root(tmp_path / "host")
    record = tmp_path / "argv.json"
    pwned = tmp_path / "PWNED"
    nasty = f"glm5 '; touch {pwned} #\" $(touch {pwned}) `touch {pwned}` & | > <"
    document = yaml.safe_load((REPO / "search_spaces/glm5.yaml").read_text())
    document["name"] = "quoting"
    document["host"] = {"address": "127.0.0.1", "user": sshd.user, "port": sshd.port, "key": sshd.key_path,
                        "python": sys.executable, "run_root": str(tmp_path / "runs")}
    document["server"]["command"] = f"{sys.executable} {REPO / 'tests/support/record_argv.py'} --time-scale 200"
    document["server"]["port"] = free_port()
    document["server"]["env"] = {**env, "RECORD_ARGV_FILE": str(record)}
    document["parameters"]["served_model_name"] = {"kind": "categorical", "flag": "--served-model-name",
                                                   "choices": [nasty]}
    document["baseline"]["served_model_name"] = nasty
    document["workload"] = {**document["workload"], **QUICK, "levels": [64, 256]}
    document["workload"].pop("emulated", None)
    document["workload"].pop("time_scale", None)
    document["workload"].pop("stream_interval", None)
    space = tmp_path / "quoting.yaml"
    space.write_text(yaml.safe_dump(document, sort_keys=False))
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "optimize", str(space), "--trials", "1",
         "--known-hosts", sshd.known_hosts_path, "--skip-doctor",
         "--storage", f"sqlite:///{tmp_path / 'q.db'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    argv = json.loads(record.read_text())
    assert argv[argv.index("--served-model-name") + 1] == nasty
    assert not pwned.exists()


def test_exported_script_runs_over_ssh_until_ready(baseline_over_ssh, sshd) -> None:
    from tuner.host import HostSpec, open_host

    run = baseline_over_ssh
    script = run.dir / "launch.sh"
    run.run("export", str(run.path), "--emulate", "--out", str(script), "--port", str(run.port))
    host = open_host(HostSpec(address="127.0.0.1", user=sshd.user, port=sshd.port,
                              key_path=sshd.key_path, known_hosts=sshd.known_hosts_path))
    try:
        done = host.run(f"cd {shlex.quote(str(run.dir))} && bash launch.sh", timeout=120,
                        env={"PYTHON": sys.executable, "TUNER_EXIT_WHEN_READY": "1"})
    finally:
        host.close()
    assert done.exit_code == 0, done.stdout + done.stderr
    assert "server ready" in done.stdout
    assert emulator_pids(run.port) == []
