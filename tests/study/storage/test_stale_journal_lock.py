"""A tuner killed while it held the study file's lock does not stop the next run: the lock it
left is released after the grace period, for the default relative path ``studies/<name>.db``
(seen: the next ``tuner optimize`` waited on the lock until its test timed out)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tuner.study.storage._storage import STALE_LOCK_S

HOLD_AND_WAIT = """
import sys, time
import optuna
from tuner.study.storage import open_storage
storage = open_storage("studies/s.db")
optuna.create_study(storage=storage, study_name="s")
storage._backend._lock.acquire()  # the product's own lock object, held as during a write
print("held", flush=True)
time.sleep(600)
"""

WRITE = """
import optuna
from tuner.study.storage import open_storage
study = optuna.load_study(storage=open_storage("studies/s.db"), study_name="s")
study.enqueue_trial({"x": 1})
print("written", len(study.trials), flush=True)
"""


def test_a_lock_left_by_a_killed_writer_is_released_for_the_next_run(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    holder = subprocess.Popen([sys.executable, "-c", HOLD_AND_WAIT], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        os.killpg(holder.pid, signal.SIGKILL)  # killed while it held the lock
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
    lock = tmp_path / "studies" / "s.db.lock"
    assert lock.is_symlink(), "the killed writer left no lock: the test did not test anything"
    assert lock.exists(), "the lock dangles: its age cannot be read, so it is never released"
    started = time.monotonic()
    try:
        write = subprocess.run([sys.executable, "-c", WRITE], cwd=tmp_path, env=env, text=True,
                               capture_output=True, timeout=STALE_LOCK_S + 90)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the next writer still waited on the stale lock after {STALE_LOCK_S + 90} s")
    assert write.returncode == 0, write.stderr
    assert write.stdout.strip() == "written 1"
    assert time.monotonic() - started >= STALE_LOCK_S - 1  # a live writer's lock is not broken early
    assert not lock.is_symlink()  # released after the write
