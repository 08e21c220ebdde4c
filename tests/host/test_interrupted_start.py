"""Ctrl-C while a server is starting leaves no server running, at whatever moment it lands.

``with ServerSession(...)`` cannot stop a server whose start was cut short: ``__exit__`` is not
called when ``__enter__`` raises, and ``start_server`` never returned the handle. A first Ctrl-C
is therefore held until the start script returned; the session then reads the handle back from
the run folder (``server.json`` is written right after the spawn) and stops that server before the
interrupt goes on. The tests send a real SIGINT at a sweep of moments from the first millisecond of
the start to after it returned, and to a start script that a slow host runs for seconds, and check
each time that no process of the server is left.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from tests.host.conftest import FAKE_BIN, ssh_spec, wait_until
from tests.support.sshd import SshServer
from tuner.engines import load_profile
from tuner.host import CommandResult, Host, HostSpec, SshHost
from tuner.interrupts import stop_cleanly
from tuner.lifecycle import ServerSession
from tuner.telemetry import GpuSampler


def _processes_with(marker: str) -> list[int]:
    """PIDs of live processes whose environment holds ``marker`` (the servers of this test)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if marker.encode() in environ.read_bytes():
                state = (environ.parent / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state not in ("Z", "X"):
                    found.append(int(environ.parent.name))
        except (OSError, IndexError):
            continue
    return found


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """The alarm sends the real Ctrl-C signal (SIGINT) to this process: held or raised."""
    os.kill(os.getpid(), signal.SIGINT)


def _sweep(delays_ms: tuple[int, ...], attempt: Callable[[dict[str, str], int], bool]) -> int:
    """Run ``attempt(env, delay_ms)`` with an interrupt due after each delay; ``env`` holds a
    unique marker the attempt's processes carry. Returns how many attempts were interrupted;
    fails naming the delays after which a marked process was still alive (those are killed)."""
    previous = signal.signal(signal.SIGALRM, _interrupt)
    leftovers: dict[int, list[int]] = {}
    interrupted = 0
    try:
        for delay_ms in delays_ms:
            name, value = "TUNER_TEST_INTERRUPT", uuid.uuid4().hex
            try:
                signal.setitimer(signal.ITIMER_REAL, delay_ms / 1000.0)
                interrupted += attempt({name: value}, delay_ms)
            except KeyboardInterrupt:
                interrupted += 1
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            marker = f"{name}={value}"
            if not wait_until(lambda: not _processes_with(marker), timeout=10.0):
                leftovers[delay_ms] = _processes_with(marker)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        for pids in leftovers.values():
            for pid in pids:  # only this test's own processes, found by their unique marker
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    assert not leftovers, f"processes left running after an interrupted start: {leftovers}"
    return interrupted


def test_ctrl_c_at_any_moment_of_a_start_leaves_no_server(host: Host, run_root: str) -> None:
    profile = load_profile("sglang")

    def start(env: dict[str, str], delay_ms: int) -> bool:
        session = ServerSession(host, profile, ["sleep", "300"], env, port=0,
                                run_dir=f"{run_root}/start-{delay_ms}", stop_grace_s=1.0)
        try:
            session.start()
            time.sleep(1.0)  # the alarm, if still due, lands here: after the start
        except KeyboardInterrupt:
            pass
        signal.setitimer(signal.ITIMER_REAL, 0)
        if session.handle is not None and host.is_running(session.handle):
            session.stop()  # the start won the race: the session owns its server
            return False
        return True

    # From inside the start script to well after the start returned (local: ~30 ms, ssh: more).
    interrupted = _sweep((1, 3, 5, 8, 12, 17, 23, 30, 40, 55, 75, 100, 140, 200, 300), start)
    assert interrupted >= 3, "the sweep never interrupted a start"


def test_server_in_reads_back_the_server_of_a_run_folder_while_it_runs(
    host: Host, run_root: str
) -> None:
    """What an interrupted start relies on: the run folder names its server (and the whole
    group, a child included, is stopped through it); once stopped, it names nothing."""
    marker = f"TUNER_TEST_READBACK={uuid.uuid4().hex}"
    name, _, value = marker.partition("=")
    session = ServerSession(host, load_profile("sglang"), ["sh", "-c", "sleep 300 & wait"],
                            {name: value}, port=0, run_dir=f"{run_root}/readback", stop_grace_s=1.0)
    assert host.server_in(session.run_dir) is None
    session.start()
    try:
        found = host.server_in(session.run_dir)
        assert found is not None and session.handle is not None
        assert (found.pid, found.starttime) == (session.handle.pid, session.handle.starttime)
        assert wait_until(lambda: len(_processes_with(marker)) == 2, timeout=5.0)
    finally:
        session.stop()
    assert wait_until(lambda: not _processes_with(marker), timeout=10.0), _processes_with(marker)
    assert host.server_in(session.run_dir) is None


def test_ctrl_c_while_the_gpu_sampler_starts_leaves_no_sampler(host: Host) -> None:
    """The same sweep for the telemetry sampler (a long-running ``nvidia-smi -lms``), which is
    started the same way and entered by ``with`` too."""

    def sample(env: dict[str, str], delay_ms: int) -> bool:
        with GpuSampler(host, interval_ms=50, env={"PATH": f"{FAKE_BIN}:{os.environ['PATH']}", **env}):
            time.sleep(1.0)  # the alarm, if still due, lands inside the block
        return False

    assert _sweep((2, 5, 9, 14, 20, 28, 40, 60, 90, 130, 200, 300), sample) >= 3


class _SlowHost(SshHost):
    """The test sshd behind a slow host: its start script begins ``delay_s`` after it was sent
    (a loaded machine, a slow login), so the server is spawned seconds after a Ctrl-C."""

    def __init__(self, spec: HostSpec, delay_s: float) -> None:
        super().__init__(spec)
        self.delay_s = delay_s

    def run(self, command: str, **options: Any) -> CommandResult:
        if "nohup setsid" in command:
            command = f"sleep {self.delay_s}\n{command}"
        return super().run(command, **options)


@contextlib.contextmanager
def _slow_start(sshd: SshServer, run_root: str, delay_s: float) -> Iterator[tuple[ServerSession, str]]:
    """A session that starts ``sleep 300`` on a host ``delay_s`` slow, and the marker its server
    carries; what is left of it afterwards (a late spawn included) is killed by that marker."""
    marker = f"TUNER_TEST_SLOW={uuid.uuid4().hex}"
    name, _, value = marker.partition("=")
    host = _SlowHost(ssh_spec(sshd, run_root), delay_s=delay_s)
    session = ServerSession(host, load_profile("sglang"), ["sleep", "300"], {name: value}, port=0,
                            run_dir=f"{run_root}/slow", stop_grace_s=1.0)
    try:
        yield session, marker
    finally:
        host.close()
        for pid in _processes_with(marker):
            os.kill(pid, signal.SIGKILL)


def _start_interrupted(session: ServerSession, *, after_s: tuple[float, ...]) -> float:
    """Start ``session`` with a real SIGINT sent at each of ``after_s``; the seconds it took
    until the interrupt came out of ``start()``."""
    timers = [threading.Timer(s, os.kill, (os.getpid(), signal.SIGINT)) for s in after_s]
    started = time.monotonic()
    try:
        for timer in timers:
            timer.start()
        with pytest.raises(KeyboardInterrupt):
            session.start()
        return time.monotonic() - started
    finally:
        for timer in timers:
            timer.cancel()


def test_ctrl_c_during_a_slow_remote_start_waits_for_it_and_stops_the_server(
    sshd: SshServer, run_root: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """The start script runs 4 s after it was sent; Ctrl-C lands after 1 s. Without the hold the
    tuner gave up at once and the server, spawned 3 s later, was left running."""
    with _slow_start(sshd, run_root, delay_s=4.0) as (session, marker):
        took = _start_interrupted(session, after_s=(1.0,))
        assert took >= 4.0, f"the interrupt came out after {took:.1f} s, before the start returned"
        assert "tuner: interrupt held until the start of 'sleep' returns" in capfd.readouterr().err
        assert wait_until(lambda: not _processes_with(marker), timeout=10.0), "server left running"


def test_abandoning_the_clean_up_does_not_wait_for_a_start_that_does_not_return(
    sshd: SshServer, run_root: str
) -> None:
    """A host that does not answer must not hold the tuner: the interrupt that abandons the
    clean-up (here the second) closes the connection and goes through at once; the server the
    host's script spawns later is left to the next run's orphan cleanup."""
    with _slow_start(sshd, run_root, delay_s=8.0) as (session, marker):
        with stop_cleanly(presses_to_abandon=2) as seen:
            took = _start_interrupted(session, after_s=(0.5, 1.5))
        assert seen.abandoned and seen.pressed == 2
        assert took < 4.0, f"the abandoning interrupt took {took:.1f} s to come out"
        wait_until(lambda: bool(_processes_with(marker)), timeout=15.0)  # the late spawn, killed
