"""``tuner doctor`` after a killed tuner, over the real sshd: the patch and the server the tuner
itself left are named as such, with what the next ``tuner optimize`` does about them (it
restores the file and stops the server), not as someone else's doing."""

from __future__ import annotations

import os
import signal

import pytest

from tests.study.conftest import N_ON
from tests.support.studies import (GATE_FILE, SLOW, STANDIN_GATE, emulator_pids, optimize_over_ssh,
                                   ssh_args, wait_for_levels)

pytestmark = pytest.mark.sshd


def test_doctor_after_a_killed_tuner_says_what_optimize_will_do(emulated_study, sshd) -> None:
    run = emulated_study(workload__emulated=SLOW)
    run.enqueue(N_ON)  # needs the autotune gate patch
    tuner = optimize_over_ssh(run, sshd, 2)
    gate = run.dir / "studies" / f"{run.name}-emulated.host" / GATE_FILE
    try:
        wait_for_levels(run, 1, 1)
        os.kill(tuner.pid, signal.SIGKILL)  # the tuner alone: its server and patch stay
        tuner.communicate(timeout=30)
    finally:
        if tuner.poll() is None:
            os.killpg(tuner.pid, signal.SIGKILL)
    try:
        assert emulator_pids(run.port) and gate.read_bytes() != STANDIN_GATE.read_bytes()
        doctor = run.run("doctor", str(run.path), "--emulate", "--port", str(run.port),
                         *ssh_args(sshd), env={"COLUMNS": "250"}, check=False)
        out = " ".join(doctor.stdout.split())  # rich wraps long lines
        assert "patched upstream or by hand" not in out
        assert "stop what listens" not in out
        assert ("PASS patch autotune_gate: applies to" in out
                and "patched now by a tuner run that was stopped; `tuner optimize` restores the "
                "original" in out), out
        assert (f"PASS port free: port {run.port} is held by a server a stopped tuner left "
                "running" in out and "`tuner optimize` stops it first" in out), out
        assert ("PASS gpus idle: no other process on the 8 GPU(s) but PID(s)" in out
                and "of a server a stopped tuner left running; `tuner optimize` stops it first"
                in out), out
        assert "the tuner never stops them" not in out
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    finally:
        run.optimize(1, *ssh_args(sshd))  # what the doctor promised
    assert emulator_pids(run.port) == []
    assert gate.read_bytes() == STANDIN_GATE.read_bytes()
