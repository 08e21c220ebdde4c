"""`nohup tuner optimize ... &`: the usual way to run a seven-hour study.

A shell starts a background job with SIGINT ignored (and nohup adds SIGHUP): its starter asked
that a Ctrl-C meant for the terminal's foreground job not reach it. The tuner keeps SIGINT
ignored, and SIGTERM (``kill PID``, a process manager, a CI timeout) still stops it cleanly:
the server stopped, the trial recorded as interrupted, the study resumed by the next run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from optuna.trial import TrialState

from tests.support.host import wait_until
from tests.support.studies import SMALL, emulator_pids, study_trials
from tests.support.signals import ignores
from tuner.interrupts import stop_cleanly

# The user's command line, as a shell runs it: a background job of a non-interactive shell
# (SIGINT and SIGQUIT ignored, stdin /dev/null) under nohup (SIGHUP ignored). The shell prints
# the tuner's PID, then waits for it and exits with its code.
NOHUP = 'nohup "$@" > tuner.log 2>&1 &\necho "$!"\nwait "$!"'


@pytest.fixture
def dispositions() -> Iterator[None]:
    """SIGINT and SIGTERM as the test leaves them are put back as they were."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


@pytest.mark.usefixtures("dispositions")
@pytest.mark.parametrize("sigterm_before", [signal.SIG_DFL, signal.SIG_IGN], ids=["sigterm-default", "sigterm-ignored"])
def test_an_ignored_sigint_stays_ignored_and_sigterm_always_stops(sigterm_before) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, sigterm_before)
    with pytest.raises(KeyboardInterrupt), stop_cleanly() as seen:
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGINT)  # ignored by the kernel: nothing happens
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)  # the SIGTERM's KeyboardInterrupt comes out here at once
    assert seen.pressed == 1
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is sigterm_before


@pytest.mark.usefixtures("dispositions")
def test_a_sigint_at_its_default_is_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    with pytest.raises(KeyboardInterrupt), stop_cleanly() as seen:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(10)
    assert seen.pressed == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_nohup_tuner_optimize_stops_on_sigterm_and_the_study_resumes(emulated_study) -> None:
    run = emulated_study(workload__emulated={**SMALL, "time_scale": 20})
    shell = subprocess.Popen(
        ["sh", "-c", NOHUP, "sh", sys.executable, "-m", "tuner", "optimize", str(run.path), "--trials", "3",
         "--emulate", "--port", str(run.port), "--seed", "7"],
        cwd=run.dir, stdout=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        assert shell.stdout is not None
        tuner = int(shell.stdout.readline())
        assert wait_until(lambda: bool(emulator_pids(run.port)) or shell.poll() is not None, 120), \
            "the emulated server never started"
        assert shell.poll() is None, (run.dir / "tuner.log").read_text()
        assert ignores(tuner, signal.SIGINT) and ignores(tuner, signal.SIGHUP)
        os.kill(tuner, signal.SIGINT)  # a Ctrl-C meant for someone else: ignored
        os.kill(tuner, signal.SIGTERM)
        code = shell.wait(timeout=60)
    finally:
        if shell.poll() is None:
            os.killpg(shell.pid, signal.SIGKILL)
            shell.wait()
    output = (run.dir / "tuner.log").read_text()
    assert code == 130, output
    assert "tuner: stopping cleanly" in output
    assert "still stopping cleanly" not in output  # the SIGINT was not counted as a first press
    assert output.rstrip().endswith("tuner: interrupted; the server was stopped and patches reverted")
    assert emulator_pids(run.port) == []
    trials = study_trials(run.study())
    assert trials[-1].state == TrialState.FAIL
    assert trials[-1].user_attrs["failure_reason"] == "interrupted"
    run.optimize(1, "--skip-doctor")
    after = study_trials(run.study())
    assert any(t.state == TrialState.COMPLETE and t.user_attrs.get("is_baseline") for t in after)
