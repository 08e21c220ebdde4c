"""Ctrl-C while a server is starting leaves no server running, at whatever moment it lands.

``with ServerSession(...)`` cannot stop a server whose start was cut short: ``__exit__`` is not
called when ``__enter__`` raises, and ``start_server`` never returned the handle. A first Ctrl-C
is therefore held until the start script returned; the session then reads the handle back from
the run folder (``server.json`` is written right after the spawn) and stops that server before the
interrupt goes on.

Two kinds of tests. The sweeps send a real SIGINT at a series of moments, from the first
millisecond of the start to after it returned, and check at every moment that no process of the
server is left; where each moment lands depends on the machine's load, so they require nothing
of that. The gated tests make a moment inside the start last on purpose: the start script waits
at a gate (before the spawn, right after it, before it returns: a slow host) until the test
opens it, and the Ctrl-C is pressed while it waits.

Every test here sets SIGINT to raise KeyboardInterrupt for itself (``ctrl_c``): a test run
started as a background job inherits SIGINT ignored, and Python then installs no handler.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from tests.support.host import FAKE_BIN, marked, processes_with, ssh_spec, wait_until
from tests.support.signals import sigint_raises
from tests.support.sshd import SshServer
from tuner.engines import load_profile
from tuner.host import CommandResult, Host, SshHost
from tuner.interrupts import CleanUpAbandoned, Interrupts, stop_cleanly
from tuner.lifecycle import ServerSession
from tuner.telemetry import GpuSampler


@pytest.fixture(autouse=True)
def ctrl_c() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in this process during the test, as from a terminal."""
    with sigint_raises():
        yield


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
            env, marker = marked("TUNER_TEST_INTERRUPT")
            try:
                signal.setitimer(signal.ITIMER_REAL, delay_ms / 1000.0)
                interrupted += attempt(env, delay_ms)
            except KeyboardInterrupt:
                interrupted += 1
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            if not wait_until(lambda: not processes_with(marker), timeout=10.0):
                leftovers[delay_ms] = processes_with(marker)
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
    print(f"interrupted {interrupted} of {len(delays_ms)} starts")  # the load decides: no minimum
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
    _sweep((1, 3, 5, 8, 12, 17, 23, 30, 40, 55, 75, 100, 140, 200, 300), start)


def test_server_in_reads_back_the_server_of_a_run_folder_while_it_runs(
    host: Host, run_root: str
) -> None:
    """What an interrupted start relies on: the run folder names its server (and the whole
    group, a child included, is stopped through it); once stopped, it names nothing."""
    env, marker = marked("TUNER_TEST_READBACK")
    session = ServerSession(host, load_profile("sglang"), ["sh", "-c", "sleep 300 & wait"],
                            env, port=0, run_dir=f"{run_root}/readback", stop_grace_s=1.0)
    assert host.server_in(session.run_dir) is None
    session.start()
    try:
        found = host.server_in(session.run_dir)
        assert found is not None and session.handle is not None
        assert (found.pid, found.starttime) == (session.handle.pid, session.handle.starttime)
        assert wait_until(lambda: len(processes_with(marker)) == 2, timeout=5.0)
    finally:
        session.stop()
    assert wait_until(lambda: not processes_with(marker), timeout=10.0), processes_with(marker)
    assert host.server_in(session.run_dir) is None


def test_ctrl_c_while_the_gpu_sampler_starts_leaves_no_sampler(host: Host) -> None:
    """The same sweep for the telemetry sampler (a long-running ``nvidia-smi -lms``), which is
    started the same way and entered by ``with`` too."""

    def sample(env: dict[str, str], delay_ms: int) -> bool:
        with GpuSampler(host, interval_ms=50, env={"PATH": f"{FAKE_BIN}:{os.environ['PATH']}", **env}):
            time.sleep(1.0)  # the alarm, if still due, lands inside the block
        return False

    _sweep((2, 5, 9, 14, 20, 28, 40, 60, 90, 130, 200, 300), sample)




class _Gate:
    """Makes the start script on ``host`` wait at ``place`` until the test opens the gate: a
    start that lasts as long as the test needs, on a loaded machine too (a slow host).

    The waiting script writes its PID to ``entered``; ``go`` lets it on, ``cancel`` ends it
    there (exit 1). :meth:`close` cancels it and waits until it ended.
    """

    PLACES = ("before-spawn", "after-spawn", "before-return")

    def __init__(self, host: Host, folder: Path, place: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.entered, self.go, self.cancel = (folder / n for n in ("entered", "go", "cancel"))
        self.place = place
        run = host.run

        def gated(command: str, **options: Any) -> CommandResult:
            if "nohup setsid" in command:
                command = self._inserted(command)
            return run(command, **options)

        host.run = gated  # type: ignore[method-assign]

    def _inserted(self, script: str) -> str:
        entered, go, cancel = (shlex.quote(str(f)) for f in (self.entered, self.go, self.cancel))
        wait = (f"echo $$ > {entered}.tmp && mv -f {entered}.tmp {entered}\n"
                f"while [ ! -e {go} ]; do [ -e {cancel} ] && exit 1; sleep 0.02; done\n")
        lines = script.splitlines(keepends=True)
        spawn = next(i for i, line in enumerate(lines) if line.startswith("nohup setsid "))
        assert lines[spawn + 1] == "pid=$!\n", lines[spawn: spawn + 2]
        at = {"before-spawn": spawn, "after-spawn": spawn + 2, "before-return": len(lines)}
        lines.insert(at[self.place], wait)
        return "".join(lines)

    def close(self) -> None:
        self.cancel.touch()
        if not self.entered.exists():
            return
        pid = int(self.entered.read_text())  # this test's own script, by its PID
        if not wait_until(lambda: not _alive(pid), timeout=10.0):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _ctrl_c(seen: Interrupts, presses: int) -> None:
    """Press Ctrl-C ``presses`` times, each once the one before was taken (``seen`` counts them).
    Sent to the main thread, where a terminal's Ctrl-C lands and Python runs its handlers."""
    for press in range(1, presses + 1):
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        assert wait_until(lambda: seen.pressed >= press, timeout=30.0), f"press {press} not taken"


@contextlib.contextmanager
def _pressed_at_the_gate(gate: _Gate, seen: Interrupts, presses: int, *,
                         open_after: bool) -> Iterator[list[BaseException]]:
    """While the block runs: once the start script waits at ``gate``, Ctrl-C is pressed
    ``presses`` times, then the gate opened if ``open_after``. Errors of the presser thread are
    put in the yielded list (and raised after the block)."""
    errors: list[BaseException] = []

    def press() -> None:
        try:
            reached = wait_until(lambda: gate.entered.exists() or gate.cancel.exists(), 60.0)
            assert reached and gate.entered.exists(), "the start never reached the gate"
            _ctrl_c(seen, presses)
            if open_after:
                gate.go.touch()
        except BaseException as error:  # noqa: BLE001 - reported by the test's thread
            errors.append(error)
            gate.cancel.touch()

    presser = threading.Thread(target=press, name="ctrl-c", daemon=True)
    presser.start()
    try:
        yield errors
    finally:
        gate.cancel.touch()  # the block is over: a script still at the gate ends there
        presser.join(timeout=120)
        gate.close()
    if errors:
        raise errors[0]


@pytest.mark.parametrize("place", _Gate.PLACES)
def test_ctrl_c_inside_a_start_waits_for_it_and_stops_the_server(
    host: Host, run_root: str, tmp_path: Path, place: str, capfd: pytest.CaptureFixture[str]
) -> None:
    """The start script waits at ``place`` (a slow host) and Ctrl-C is pressed then: the
    interrupt comes out only once the start returned, and the server is stopped. Without the
    hold the tuner gave up at once and the server, spawned later, was left running."""
    gate = _Gate(host, tmp_path / "gate", place)
    env, marker = marked("TUNER_TEST_GATED")
    session = ServerSession(host, load_profile("sglang"), ["sleep", "300"], env, port=0,
                            run_dir=f"{run_root}/gated", stop_grace_s=1.0)
    try:
        with stop_cleanly() as seen, _pressed_at_the_gate(gate, seen, 1, open_after=True):
            with pytest.raises(KeyboardInterrupt):
                session.start()
            assert gate.go.exists(), "the interrupt came out before the start returned"
        assert seen.pressed == 1 and not seen.abandoned
        assert "tuner: interrupt held until the start of 'sleep' returns" in capfd.readouterr().err
        assert wait_until(lambda: not processes_with(marker), timeout=10.0), "server left running"
    finally:
        for pid in processes_with(marker):  # only this test's own server, by its unique marker
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("place", ["before-spawn", "before-return"])
def test_ctrl_c_inside_the_gpu_sampler_s_start_leaves_no_sampler(
    host: Host, tmp_path: Path, place: str
) -> None:
    gate = _Gate(host, tmp_path / "gate", place)
    env, marker = marked("TUNER_TEST_GATED")
    try:
        with stop_cleanly() as seen, _pressed_at_the_gate(gate, seen, 1, open_after=True):
            with pytest.raises(KeyboardInterrupt):
                with GpuSampler(host, interval_ms=50,
                                env={"PATH": f"{FAKE_BIN}:{os.environ['PATH']}", **env}):
                    pytest.fail("the sampler's start was interrupted: its block never runs")
            assert gate.go.exists(), "the interrupt came out before the start returned"
        assert wait_until(lambda: not processes_with(marker), timeout=10.0), "sampler left running"
    finally:
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_abandoning_the_clean_up_does_not_wait_for_a_start_that_does_not_return(
    sshd: SshServer, run_root: str, tmp_path: Path
) -> None:
    """A host that does not answer must not hold the tuner: its start script waits at the gate
    for good, and the interrupt that abandons the clean-up (here the second) closes the
    connection and comes out while it still waits; what the host's script would spawn later is
    left to the next run's orphan cleanup (here the script is cancelled at the gate)."""
    host = SshHost(ssh_spec(sshd, run_root))
    gate = _Gate(host, tmp_path / "gate", "before-spawn")
    env, marker = marked("TUNER_TEST_ABANDONED")
    session = ServerSession(host, load_profile("sglang"), ["sleep", "300"], env, port=0,
                            run_dir=f"{run_root}/abandoned", stop_grace_s=1.0)
    try:
        with stop_cleanly(presses_to_abandon=2) as seen:
            with _pressed_at_the_gate(gate, seen, 2, open_after=False):
                with pytest.raises(CleanUpAbandoned):
                    session.start()
                assert not gate.go.exists(), "the abandoning interrupt waited for the start"
        assert seen.abandoned and seen.pressed == 2
    finally:
        host.close()
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)
