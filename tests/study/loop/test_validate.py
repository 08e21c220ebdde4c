"""`tuner validate` on the emulator: a configuration that passes the study but not a long soak,
and a soak stopped by SIGTERM."""

from __future__ import annotations

import signal

import optuna

from tests.study.conftest import N_ON
from tests.support.studies import GATE_FILE, SMALL, STANDIN_GATE, emulator_pids, signalled, tuner_with_a_server

# Memory 0.95: it starts cleanly and survives short levels up to 512 concurrent requests, but a
# sustained load of 512 leaks until it runs out of memory (tuner/emulator/calibration.py).
LEAKY = {**N_ON, "mem_fraction_static": 0.95}


def test_a_configuration_that_fails_only_in_a_long_soak_is_never_exported(emulated_study) -> None:
    run = emulated_study(workload__emulated=SMALL, constraints=[])
    run.enqueue(LEAKY)
    run.optimize(2)
    trials = run.study().get_trials()
    leaky = trials[1]
    assert leaky.state == optuna.trial.TrialState.COMPLETE  # the study alone cannot tell
    assert leaky.value > trials[0].value

    # 600 host s at 512 (the default soak): twice the 300 s of decode after which it runs out.
    result = run.run("validate", str(run.path), "--emulate", "--port", str(run.port),
                     "--top", "2", "--duration", "600")
    assert f"trial {leaky.number}: unstable" in result.stderr
    assert "out of memory" in result.stderr.lower() or "unstable-at-512" in result.stderr
    assert "trial 0: stable" in result.stderr
    validation = run.study().user_attrs["validation"]
    assert validation[str(leaky.number)]["stable"] is False
    assert validation["0"]["stable"] is True and validation["0"]["runs"] == 3
    assert validation["0"]["std_output_throughput"] >= 0.0
    assert emulator_pids(run.port) == []

    best = run.run("best", str(run.path), "--emulate", "--json")
    assert '"trial": 0' in best.stdout
    script = run.dir / "launch.sh"
    run.run("export", str(run.path), "--emulate", "--out", str(script))
    header = script.read_text().splitlines()[:4]
    assert any("trial: 0" in line for line in header)


def test_sigterm_during_a_soak_stops_the_server_and_reverts_the_patch(emulated_study) -> None:
    """SIGTERM (a process manager, a CI timeout) ends `tuner validate` like Ctrl-C: before, it
    killed the tuner outright and left the soaked server running and the gate patched."""
    run = emulated_study(workload__emulated=SMALL)
    run.enqueue(N_ON)  # the seeds' winner: needs the autotune gate patch
    run.optimize(2)
    host_root = run.dir / "studies" / f"{run.name}-emulated.host"
    gate = host_root / GATE_FILE
    tuner = tuner_with_a_server(run, "validate", str(run.path), "--emulate", "--port",
                                str(run.port), "--top", "1", "--duration", "3600")
    patched_for_the_soak = gate.read_bytes() != STANDIN_GATE.read_bytes()
    code, output = signalled(tuner, signal.SIGTERM)
    assert patched_for_the_soak
    assert code == 130, output
    assert "tuner: interrupted; the server was stopped and patches reverted" in output
    assert emulator_pids(run.port) == []
    assert gate.read_bytes() == STANDIN_GATE.read_bytes()
    assert not list(host_root.rglob("tuner.claim")), "the host claim was left behind"
