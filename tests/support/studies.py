"""Whole studies on the emulated host, as the study tests run them: the workloads (``SMALL``,
``QUICK``, ``SLOW``), the study's trials, the emulators serving a port, a ``tuner`` started in the
background (locally or over the session's sshd) and signalled, the patched file of the emulated
host."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna

from tests.support.signals import sigint_default
from tuner.study.record import repeats_of

REPO = Path(__file__).resolve().parents[2]

# One wave a level at K=50: short, and slow enough for the client to measure the model (the
# client costs about 1 ms of CPU a request, 50 ms of host time here).
SMALL = {"levels": [64, 256, 512], "output_len": 256, "requests_per_level": {"per_concurrency": 1, "min": 64},
         "time_scale": 50, "stream_interval": 32}
# For tests of what happens around the measurement (start-up failures, constraints, the probe,
# reuse of the study, exports, secrets): short levels at K=200, nothing measured is asserted.
QUICK = {"levels": [64, 256, 512], "output_len": 32, "requests_per_level": {"per_concurrency": 1, "min": 64},
         "time_scale": 200, "stream_interval": 32}


def study_trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return study.get_trials(deepcopy=False)


def re_runs(study: optuna.Study) -> int:
    """The winner's re-runs made in ``study`` (failed ones too): runs of the ``--trials`` budget
    that are not trials of their own (``tuner.study.loop.Confirmation``)."""
    repeats = repeats_of(study.user_attrs)
    return sum(len(r["values"]) + len(r["failed"]) - 1 for r in repeats.values())


def emulator_pids(port: int) -> list[int]:
    """PIDs of emulators serving this test's port (read-only scan, never a kill by pattern)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if b"tuner.emulator" in argv and str(port).encode() in argv and state != "Z":
            found.append(int(entry.name))
    return found


def tuner_with_a_server(run: Any, *args: str) -> subprocess.Popen[str]:
    """``tuner ARGS`` started in the background in the study's folder, once its emulated server
    runs (its output piped; its own session, so that a failed test can kill its group; SIGINT at
    its default, as from a terminal, whatever this test run inherited)."""
    command = sigint_default([sys.executable, "-m", "tuner", *args])
    tuner = subprocess.Popen(command, cwd=run.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while not emulator_pids(run.port) and time.monotonic() < deadline and tuner.poll() is None:
        time.sleep(0.2)
    if not emulator_pids(run.port):
        os.killpg(tuner.pid, signal.SIGKILL)
        raise AssertionError(f"the emulated server never started: {tuner.communicate()[0]}")
    return tuner


def signalled(
    tuner: subprocess.Popen[str], signum: int, after_s: float = 1.0, presses: int = 1, every_s: float = 0.0
) -> tuple[int, str]:
    """Send ``signum`` to the tuner after ``after_s``, ``presses`` times ``every_s`` apart (fewer
    if it ends first); its exit code and output once it ended (SIGKILLed with its group if it
    does not end within a minute)."""
    try:
        time.sleep(after_s)
        for _ in range(presses):
            if tuner.poll() is not None:
                break
            tuner.send_signal(signum)
            time.sleep(every_s)
        output, _ = tuner.communicate(timeout=60)
    finally:
        if tuner.poll() is None:
            os.killpg(tuner.pid, signal.SIGKILL)
    return tuner.returncode, output
# Long enough levels (host time / 50) to act in the middle of one.
SLOW = {"levels": [64, 256, 512], "output_len": 256,
        "requests_per_level": {"per_concurrency": 2, "min": 128}, "time_scale": 50}
GATE_FILE = "site/sglang/srt/model_executor/model_runner.py"
STANDIN_GATE = REPO / "tuner/emulator/standin/sglang/srt/model_executor/model_runner.py"


def ssh_args(sshd) -> list[str]:
    return ["--host", f"{sshd.user}@127.0.0.1:{sshd.port}", "--ssh-key", sshd.key_path,
            "--known-hosts", sshd.known_hosts_path]


def optimize_over_ssh(run, sshd, trials: int) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "tuner", "optimize", str(run.path), "--trials", str(trials),
               "--emulate", "--port", str(run.port), "--seed", "7", *ssh_args(sshd)]
    return subprocess.Popen(command, cwd=run.dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def wait_for_levels(run, trial_number: int, count: int, timeout: float = 120) -> None:
    """Wait until the trial has stored ``count`` levels."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if run.db.exists():
            try:
                trials = study_trials(run.study())
            except Exception:  # the study is being created
                trials = []
            if len(trials) > trial_number and len(trials[trial_number].user_attrs.get("levels", [])) >= count:
                return
        time.sleep(0.1)
    raise AssertionError(f"trial {trial_number} never finished {count} level(s)")

