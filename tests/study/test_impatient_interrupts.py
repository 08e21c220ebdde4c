"""Ctrl-C pressed again and again (an impatient user) while the tuner stops its server.

The first Ctrl-C starts the clean-up: stop the server, revert the patches, release the host. A
user who sees nothing happen for a moment presses again; those interrupts must not cut the
clean-up short (before, one landing in the server's stop could leave the server running, and one
in the revert the gate patched). The tuner says it is stopping and exits 130 when done. The
fourth interrupt abandons the clean-up, and the next run on the host finishes it.
"""

from __future__ import annotations

import signal
import time

import pytest
from optuna.trial import TrialState

from tests.study.conftest import N_ON
from tests.support.studies import (GATE_FILE, SMALL, STANDIN_GATE, emulator_pids, signalled, ssh_args,
                                   study_trials, tuner_with_a_server)
from tuner.interrupts import PRESSES_TO_ABANDON


@pytest.mark.parametrize("transport", ["local", "ssh"])
@pytest.mark.parametrize("every_s", [0.02, 0.1, 0.3])
def test_ctrl_c_pressed_again_during_the_clean_up_leaves_nothing_behind(
    emulated_study, request: pytest.FixtureRequest, transport: str, every_s: float
) -> None:
    # The baseline is the seeds' winner: its server runs with the autotune gate patched.
    run = emulated_study(workload__emulated={**SMALL, "time_scale": 20}, baseline=N_ON)
    over = ssh_args(request.getfixturevalue("sshd")) if transport == "ssh" else []
    host_root = run.dir / "studies" / f"{run.name}-emulated.host"
    gate = host_root / GATE_FILE
    tuner = tuner_with_a_server(run, "optimize", str(run.path), "--trials", "2", "--emulate",
                                "--port", str(run.port), "--seed", "7", *over)
    time.sleep(1.0)
    patched_while_running = gate.read_bytes() != STANDIN_GATE.read_bytes()
    code, output = signalled(tuner, signal.SIGINT, 0.0, presses=PRESSES_TO_ABANDON - 1, every_s=every_s)
    assert patched_while_running
    assert code == 130, output
    assert "tuner: stopping cleanly (interrupt 3 more times to abandon the clean-up)" in output
    assert "abandon" not in output.splitlines()[-1]
    assert output.rstrip().endswith("tuner: interrupted; the server was stopped and patches reverted")
    assert emulator_pids(run.port) == [], output
    assert gate.read_bytes() == STANDIN_GATE.read_bytes(), "the gate was left patched"
    assert not list(host_root.rglob("tuner.claim")), "the host claim was left behind"
    trials = study_trials(run.study())
    assert trials[0].state == TrialState.FAIL
    assert trials[0].user_attrs["failure_reason"] == "interrupted"


def test_the_interrupt_that_abandons_the_clean_up_is_said_and_the_next_run_finishes_it(
    emulated_study,
) -> None:
    """Pressed four times, the tuner gives up its clean-up and says so (never that the server was
    stopped); the next run on the host stops what is left and reverts the gate. The server's stop
    command takes 3 s (a slow container runtime), so the presses land while it runs."""
    run = emulated_study(workload__emulated={**SMALL, "time_scale": 20}, baseline=N_ON,
                         server__stop_command="sleep 3")
    gate = run.dir / "studies" / f"{run.name}-emulated.host" / GATE_FILE
    tuner = tuner_with_a_server(run, "optimize", str(run.path), "--trials", "2", "--emulate",
                                "--port", str(run.port), "--seed", "7")
    code, output = signalled(tuner, signal.SIGINT, 1.0, presses=PRESSES_TO_ABANDON, every_s=0.2)
    assert code == 130, output
    assert "tuner: clean-up abandoned" in output
    assert "the server was stopped and patches reverted" not in output
    assert emulator_pids(run.port), "abandoned in the middle of its stop, the server still runs"
    run.optimize(1, "--skip-doctor")
    assert emulator_pids(run.port) == []
    assert gate.read_bytes() == STANDIN_GATE.read_bytes()
    assert any(t.state == TrialState.COMPLETE for t in study_trials(run.study()))
