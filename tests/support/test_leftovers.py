"""The tests' own clean-up (``tests/support/leftovers.py``, used by ``emulated_study``): a server a
test left running under its directory is found by its ``server.json`` and stopped by its process
group; a process outside the directory is never touched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.leftovers import stop_servers_left_in
from tuner.host import LocalHost


def test_a_server_left_under_the_test_directory_is_stopped_and_nothing_else(tmp_path: Path) -> None:
    inside, outside = tmp_path / "test", tmp_path / "elsewhere"
    host = LocalHost(str(tmp_path))
    sleeper = [sys.executable, "-c", "import time; time.sleep(300)"]
    left = host.start_server(sleeper, env={}, run_dir=str(inside / "runs" / "trial-0000"))
    other = host.start_server(sleeper, env={}, run_dir=str(outside / "trial-0000"))
    unrelated = subprocess.Popen(sleeper, start_new_session=True)
    try:
        assert host.is_running(left) and host.is_running(other)
        stopped = stop_servers_left_in(inside)
        assert stopped == [f"PID {left.pid} (runs/trial-0000)"]
        assert not host.is_running(left)
        assert host.is_running(other) and unrelated.poll() is None  # not under the directory
        assert stop_servers_left_in(inside) == []  # stopped once; nothing left to say
    finally:
        stop_servers_left_in(outside)
        unrelated.kill()
        unrelated.wait()
    assert not host.is_running(other)
