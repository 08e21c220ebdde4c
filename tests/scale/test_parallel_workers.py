"""Several hosts, one study: two `tuner optimize` workers on two emulated hosts (each behind its
own sshd on 127.0.0.1) feeding one Optuna study in a real PostgreSQL server.

Each worker runs in its own folder, so each has its own emulated host root (its patched files,
GPU state and run directory: ``studies/<stem>-emulated.host`` under the worker's current folder)
and its own server port. A worker SIGKILLed mid-trial stops sending heartbeats; the other worker
marks its trial FAIL ``worker-died`` and runs that configuration again; a configuration that
crashed its server is never run again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from tests.study.conftest import EmulatedStudy
from tests.support.sshd import SSHD_BINARY, SshServer, free_port
from tuner.failures import FailureClass
from tuner.study.record import records, repeats_of

pytestmark = [pytest.mark.postgres, pytest.mark.sshd]

SMALL = {
    "levels": [64, 256, 512],
    "output_len": 32,
    "requests_per_level": {"per_concurrency": 1, "min": 64},
    "time_scale": 200,
}
# Levels long enough (host time / 50) to kill a worker in the middle of one.
SLOW = {
    "levels": [64, 256, 512],
    "output_len": 256,
    "requests_per_level": {"per_concurrency": 2, "min": 128},
    "time_scale": 50,
}
# For properties settled before the first level (start-up, probe): the least measuring there is.
ONE_SHORT_LEVEL = {
    "levels": [64],
    "output_len": 32,
    "requests_per_level": {"per_concurrency": 1, "min": 64},
}
FA3 = "attention_backend=fa3"  # serves garbage: FAIL wrong-output, a crash of the configuration


@pytest.fixture
def second_sshd(tmp_path: Path) -> Iterator[SshServer]:
    """Another sshd on 127.0.0.1: the second emulated host."""
    if not os.access(SSHD_BINARY, os.X_OK):
        pytest.skip(f"{SSHD_BINARY} is missing: apt-get install -y openssh-server")
    server = SshServer(tmp_path / "sshd-b")
    try:
        server.start()
        yield server
    finally:
        server.stop()


class Worker:
    """One ``tuner optimize`` process on one emulated host, in its own folder."""

    def __init__(self, run: EmulatedStudy, sshd: SshServer, name: str, url: str) -> None:
        self.run, self.sshd, self.url = run, sshd, url
        self.dir = run.dir / name
        self.dir.mkdir()
        self.port = free_port()
        self.host_name = f"{sshd.user}@127.0.0.1:{sshd.port}"
        self.process: subprocess.Popen[str] | None = None

    def start(self, trials: int, seed: int) -> None:
        command = [
            sys.executable,
            "-m",
            "tuner",
            "optimize",
            str(self.run.path),
            "--trials",
            str(trials),
            "--emulate",
            "--port",
            str(self.port),
            "--seed",
            str(seed),
            "--host",
            self.host_name,
            "--ssh-key",
            self.sshd.key_path,
            "--known-hosts",
            self.sshd.known_hosts_path,
            "--storage",
            self.url,
            "--study-name",
            self.run.name,
            "--heartbeat-seconds",
            "1",
        ]
        self.process = subprocess.Popen(
            command,
            cwd=self.dir,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    def finish(self, timeout: float = 150) -> tuple[int, str]:
        assert self.process is not None
        output, _ = self.process.communicate(timeout=timeout)
        return self.process.returncode, output

    def stop(self, timeout: float = 60) -> tuple[int, str]:
        """SIGTERM, which the tuner takes as Ctrl-C: it stops its server and exits."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.finish(timeout)

    def server_pids(self) -> list[tuple[int, str]]:
        """(PID, start time) of the emulated servers and GPU samplers this worker started (their
        run records)."""
        runs = self.dir / "studies" / f"{self.run.name}-emulated.host" / "runs"
        found = []
        records = [*runs.glob(f"{self.run.name}/trial-*/server.json"), *runs.glob(".telemetry/*/server.json")]
        for record in records:
            try:
                fields = json.loads(record.read_text())
                found.append((int(fields["pid"]), str(fields["starttime"])))
            except (OSError, ValueError, KeyError):
                continue
        return found

    def kill(self) -> None:
        """SIGKILL the worker's process group (it started no other group of its own)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.communicate(timeout=30)


def _stop_servers(workers: list[Worker]) -> None:
    """Stop the servers a killed worker left behind: by the process group of each PID in their
    own files, only while that PID is still the server its ``server.json`` recorded (same start
    time), so that a PID the kernel has given to another process is never signalled."""
    for worker in workers:
        for pid, starttime in worker.server_pids():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if stat[19] != starttime:
                continue
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _enqueue(run: EmulatedStudy, url: str, assignment: str) -> None:
    run.run(
        "enqueue",
        str(run.path),
        "--emulate",
        "--storage",
        url,
        "--study-name",
        run.name,
        "--set",
        assignment,
    )


def _host_runs(trials: list[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    """Trials that spent host time (not skipped by a constraint or the gate, not reused)."""
    return [
        t
        for t in trials
        if "config_key" in t.user_attrs
        and "reused_from" not in t.user_attrs
        and not (t.state == TrialState.PRUNED and t.user_attrs.get("pruned_by") != "baseline")
        and not (t.state == TrialState.FAIL and t.user_attrs.get("failure_reason", "worker-died") == "worker-died")
    ]  # a trial the stale-trial check failed stores no reason: it reads as worker-died


def _load(url: str, name: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=name, storage=url).get_trials(deepcopy=False)


def test_two_hosts_feed_one_study(
    tmp_path: Path, postgres_url: str, sshd: SshServer, second_sshd: SshServer
) -> None:
    run = EmulatedStudy(tmp_path, name="pair", workload__emulated=SMALL)
    _enqueue(run, postgres_url, FA3)
    workers = [
        Worker(run, sshd, "worker-a", postgres_url),
        Worker(run, second_sshd, "worker-b", postgres_url),
    ]
    try:
        for seed, worker in enumerate(workers, start=1):
            worker.start(trials=3, seed=seed)
        outcomes = [worker.finish() for worker in workers]
    finally:
        for worker in workers:
            worker.kill()
        _stop_servers(workers)
    for code, output in outcomes:
        assert code == 0, output
    trials = _load(postgres_url, run.name)
    assert all(t.state != TrialState.RUNNING for t in trials)
    assert all(t.user_attrs.get("host") in {w.host_name for w in workers} for t in trials)
    ran = _host_runs(trials)
    # each worker's budget of 3: its configurations, and the re-run of its own trial when it has
    # the study's winner (a re-run is made on the host that ran the trial: like for like)
    per_host = Counter(t.user_attrs["host"] for t in ran)
    repeats = repeats_of(optuna.load_study(study_name=run.name, storage=postgres_url).user_attrs)
    rerun = Counter(next(t.user_attrs["host"] for t in trials if t.number == int(n))
                    for n, r in repeats.items() for _ in range(len(r["values"]) + len(r["failed"]) - 1))
    assert {w.host_name: per_host[w.host_name] + rerun[w.host_name] for w in workers} == {
        w.host_name: 3 for w in workers}, (per_host, rerun)
    keys = Counter(t.user_attrs["config_key"] for t in ran)
    assert max(keys.values()) == 1, f"ran twice: {[k for k, n in keys.items() if n > 1]}"
    assert sum(bool(t.user_attrs.get("is_baseline")) for t in ran) == 1
    # The enqueued fa3 is caught by the probe; a sampler may draw fa3 again with other values
    # (a new configuration), and it must be caught the same way; nothing else is wrong output.
    garbage = {t.number for t in ran if t.user_attrs["config"]["attention_backend"] == "fa3"}
    wrong = {t.number for t in ran if t.user_attrs.get("failure_reason") == "wrong-output"}
    assert garbage and wrong == garbage, [(t.number, t.user_attrs.get("failure_detail")) for t in ran]
    assert not any(t.user_attrs.get("retry_of") is not None for t in trials)


def _running_with_a_level(url: str, name: str, host: str) -> optuna.trial.FrozenTrial | None:
    for trial in _load(url, name):
        if (
            trial.state == TrialState.RUNNING
            and trial.user_attrs.get("host") == host
            and trial.user_attrs.get("levels")
        ):
            return trial
    return None


def _wait_for(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_killed_worker_s_trial_is_failed_by_heartbeat_and_run_again(
    tmp_path: Path, postgres_url: str, sshd: SshServer, second_sshd: SshServer
) -> None:
    run = EmulatedStudy(tmp_path, name="heartbeat", workload__emulated=SLOW)
    _enqueue(run, postgres_url, FA3)
    doomed = Worker(run, sshd, "worker-a", postgres_url)
    survivor = Worker(run, second_sshd, "worker-b", postgres_url)
    try:
        doomed.start(trials=4, seed=1)
        survivor.start(trials=10, seed=2)  # more than it needs: stopped once the retry ran
        victim = _wait_for(
            lambda: _running_with_a_level(postgres_url, run.name, doomed.host_name),
            120,
            "a trial of worker A in the middle of its levels",
        )
        doomed.kill()  # SIGKILL: no Ctrl-C handling, no tell(): only its heartbeats stop
        _wait_for(
            lambda: _finished_retry(postgres_url, run.name, victim.number),
            180,
            f"trial {victim.number} failed by heartbeat and run again to its end",
        )
        code, output = survivor.stop()
    finally:
        doomed.kill()
        survivor.kill()
        _stop_servers([doomed, survivor])
    # Finished, or stopped like Ctrl-C (its trial FAIL interrupted). Once in a full-suite run on
    # the loaded 2-core machine, the tuner went through its whole Ctrl-C path (its last line
    # below) and the process then ended by SIGINT (-2; a shell shows 130 for both).
    stopped_like_ctrl_c = code == -signal.SIGINT and output.rstrip().endswith(
        "tuner: interrupted; the server was stopped and patches reverted"
    )
    assert code in (0, 130) or stopped_like_ctrl_c, output
    trials = _load(postgres_url, run.name)
    died = trials[victim.number]
    assert died.state == TrialState.FAIL
    assert "failure_reason" not in died.user_attrs  # failed by Optuna's stale-trial check
    study = optuna.load_study(study_name=run.name, storage=postgres_url)
    assert records(study)[victim.number].failure_class is FailureClass.WORKER_DIED
    retries = [t for t in trials if t.user_attrs.get("retry_of") is not None]
    assert [t.user_attrs["retry_of"] for t in retries] == [victim.number]
    retry = retries[0]
    assert retry.user_attrs["config_key"] == died.user_attrs["config_key"]
    assert retry.user_attrs["host"] == survivor.host_name
    assert retry.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    assert retry.user_attrs.get("failure_reason") != "worker-died"
    crashed = [t for t in trials if t.user_attrs.get("failure_reason") == "wrong-output"]
    # A configuration that crashed its server is never run again after the crash: no trial is a
    # retry of it and no later host run has its configuration. (It may itself be the retry of the
    # killed worker's trial, when that trial was this configuration.) A sampler may draw fa3 again
    # with other values: that is another configuration, caught by the probe the same way.
    assert len({t.user_attrs["config_key"] for t in crashed}) == len(crashed)
    for bad in crashed:
        assert not any(t.user_attrs.get("retry_of") == bad.number for t in trials)
        assert not [
            t for t in _host_runs(trials)
            if t.number > bad.number and t.user_attrs["config_key"] == bad.user_attrs["config_key"]
        ]
    assert all(t.state != TrialState.RUNNING for t in trials)


def _finished_retry(url: str, name: str, number: int) -> bool:
    return any(
        t.user_attrs.get("retry_of") == number
        and t.state in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
        for t in _load(url, name)
    )


def _baseline_running(url: str, name: str) -> optuna.trial.FrozenTrial | None:
    try:
        trials = _load(url, name)
    except KeyError:  # the worker has not created the study yet
        return None
    for trial in trials:
        if trial.state == TrialState.RUNNING and trial.user_attrs.get("is_baseline"):
            return trial
    return None


def test_no_configuration_is_probed_before_the_baseline_gave_the_reference(
    tmp_path: Path, postgres_url: str, sshd: SshServer, second_sshd: SshServer
) -> None:
    """Worker B starts while worker A runs the baseline, with fa3 (garbage at full speed) queued
    next: B waits for the baseline's probe outputs instead of probing fa3 against nothing, so fa3
    ends FAIL wrong-output, not COMPLETE."""
    # The baseline compiles with torch.compile (90 s more start-up on the emulated host, 9 s here
    # at K=10), so fa3, queued next and started on B a moment later, is ready to be probed first.
    # What is asserted happens before any level: one short level, so that the baseline's levels
    # (at K=10) do not keep both workers waiting once the order is settled.
    run = EmulatedStudy(
        tmp_path, name="reference", workload__emulated={**ONE_SHORT_LEVEL, "time_scale": 10},
        parameters__torch_compile={"kind": "store_true", "flag": "--enable-torch-compile"},
        baseline__torch_compile=True,
    )
    first = Worker(run, sshd, "worker-a", postgres_url)
    second = Worker(run, second_sshd, "worker-b", postgres_url)
    try:
        first.start(trials=1, seed=1)
        _wait_for(lambda: _baseline_running(postgres_url, run.name), 120, "worker A on the baseline")
        run.run("enqueue", str(run.path), "--emulate", "--storage", postgres_url, "--study-name",
                run.name, "--set", FA3, "--set", "torch_compile=false")  # the next trial asked for
        second.start(trials=1, seed=2)
        (code_a, out_a), (code_b, out_b) = first.finish(), second.finish()
    finally:
        first.kill()
        second.kill()
        _stop_servers([first, second])
    assert code_a == 0, out_a
    assert code_b == 0, out_b
    assert "waiting for the baseline, running on another worker" in out_b
    trials = _load(postgres_url, run.name)
    baseline = next(t for t in trials if t.user_attrs.get("is_baseline"))
    fa3 = [t for t in trials if t.user_attrs.get("config", {}).get("attention_backend") == "fa3"]
    assert baseline.state == TrialState.COMPLETE
    assert len(fa3) == 1 and fa3[0].user_attrs["host"] == second.host_name
    # Probed against the baseline's outputs (with no reference the probe would have passed it).
    assert fa3[0].state == TrialState.FAIL and fa3[0].user_attrs["failure_reason"] == "wrong-output"
    assert "match the baseline's" in fa3[0].user_attrs["failure_detail"]
