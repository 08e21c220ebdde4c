"""One tuner per host, end to end: a second `tuner optimize` on a host in use stops at once.

Both tuners run in the same folder, so they share the emulated host (its run root, its patched
`sglang` files); each has its own port and its own study, so nothing but the host is shared.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import optuna
from optuna.trial import TrialState

from tests.support.host import wait_until
from tests.study.conftest import N_ON
from tests.support.studies import GATE_FILE, SMALL, STANDIN_GATE, emulator_pids, study_trials, wait_for_levels
from tests.support.sshd import free_port


def _stop(tuner: subprocess.Popen[str]) -> None:
    """On a failed assertion: SIGTERM the tuner (it stops its server), SIGKILL it if that hangs."""
    if tuner.poll() is not None:
        return
    tuner.send_signal(signal.SIGTERM)
    try:
        tuner.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(tuner.pid, signal.SIGKILL)
        tuner.communicate()


def test_a_second_tuner_on_a_host_in_use_exits_and_the_first_runs_on(emulated_study) -> None:
    run = emulated_study(workload__emulated={**SMALL, "requests_per_level": {"per_concurrency": 3, "min": 192}})
    run.enqueue(N_ON)  # trial 1 needs the autotune gate patch: applied on the host while it runs
    host_root = run.dir / "studies" / f"{run.name}-emulated.host"
    claim, gate = host_root / "runs" / "tuner.claim", host_root / GATE_FILE
    first = subprocess.Popen(
        [sys.executable, "-m", "tuner", "optimize", str(run.path), "--trials", "2", "--emulate",
         "--port", str(run.port), "--seed", "7"],
        cwd=run.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    try:
        wait_for_levels(run, 0, 3)  # the baseline is done: trial 1 starts, its patch applied
        assert wait_until(lambda: gate.read_bytes() != STANDIN_GATE.read_bytes(), 60), "never patched"
        assert claim.is_file()

        other_port = free_port()
        started = time.monotonic()
        second = run.run("optimize", str(run.path), "--trials", "1", "--emulate", "--port", str(other_port),
                         "--study-name", "intruder", "--storage", f"sqlite:///{run.dir}/intruder.db",
                         check=False, timeout=120)
        took = time.monotonic() - started
        assert second.returncode == 1, second.stdout + second.stderr
        errors = [line for line in second.stderr.splitlines() if line.strip()]
        assert len(errors) == 1 and errors[0].startswith("tuner: error: "), second.stderr
        assert f"in use by tuner PID {first.pid} " in errors[0] and f"(study {run.name})" in errors[0]
        assert took < 30, f"the second tuner took {took:.1f} s to give up"
        assert first.poll() is None, "the first tuner should still be running"
        assert gate.read_bytes() != STANDIN_GATE.read_bytes()  # the first one's patch kept
        assert emulator_pids(other_port) == []
        intruder = optuna.load_study(study_name="intruder", storage=f"sqlite:///{run.dir}/intruder.db")
        assert intruder.get_trials() == []  # refused before its first trial

        # validate claims the host too; doctor only reads the claim (both at once: the first runs on)
        soak, checked = [
            subprocess.Popen([sys.executable, "-m", "tuner", *args, str(run.path), "--emulate", "--port",
                              str(other_port)], cwd=run.dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, stdin=subprocess.DEVNULL, start_new_session=True)
            for args in (["validate", "--top", "1", "--duration", "30"], ["doctor"])
        ]
        try:
            soak_out, soak_err = soak.communicate(timeout=120)
            checked_out, _ = checked.communicate(timeout=120)
        finally:
            for process in (soak, checked):
                if process.poll() is None:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
        assert soak.returncode == 1 and f"in use by tuner PID {first.pid} " in soak_err, soak_out + soak_err
        assert "soaking" not in soak_err
        assert checked.returncode == 1, checked_out
        assert f"FAIL host not claimed: in use by tuner PID {first.pid} " in checked_out, checked_out
        assert first.poll() is None, "the first tuner should still be running"
        assert claim.is_file() and gate.read_bytes() != STANDIN_GATE.read_bytes()
        print(f"second tuner gave up after {took:.1f} s; validate and doctor done at "
              f"{time.monotonic() - started:.1f} s")
        first_left = time.monotonic()

        output, _ = first.communicate(timeout=180)
        print(f"the first tuner ended {time.monotonic() - first_left:.1f} s later")
    finally:
        _stop(first)
    assert first.returncode == 0, output
    trials = study_trials(run.study())
    assert [t.state for t in trials[:2]] == [TrialState.COMPLETE, TrialState.COMPLETE], output
    assert not any(t.state == TrialState.FAIL for t in trials), output
    assert "took over" not in output
    assert not claim.exists()
    assert gate.read_bytes() == STANDIN_GATE.read_bytes()  # no patch left applied
    assert emulator_pids(run.port) == []
