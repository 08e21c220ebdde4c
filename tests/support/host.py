"""Fixtures of the tests that run on a host (registered in tests/conftest.py): a host of each transport, a run root, a server tracker.

``host`` is parametrized: every test that takes it runs on :class:`LocalHost` and on
:class:`SshHost` against the session's real sshd on 127.0.0.1. ``servers`` stops, on every path,
each server a test started (through the host, and by its process group if the host is broken).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.sshd import SshServer
from tuner.host import Host, HostSpec, LocalHost, ServerHandle, open_host

HERE = Path(__file__).parent
REPO = HERE.parent.parent
FAKE_SERVER = str(HERE / "fake_server.py")
FAKE_BIN = str(HERE / "bin")
PYTHON = sys.executable


def ssh_spec(sshd: SshServer, run_root: str, **overrides: object) -> HostSpec:
    """A HostSpec for the test sshd."""
    fields: dict[str, object] = {
        "address": sshd.host,
        "port": sshd.port,
        "user": sshd.user,
        "key_path": sshd.key_path,
        "known_hosts": sshd.known_hosts_path,
        "run_root": run_root,
        "python": PYTHON,
    }
    fields.update(overrides)
    return HostSpec(**fields)  # type: ignore[arg-type]


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) PIDs whose process group is ``pgid``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            found.append(int(stat.parent.name))
    return found


def processes_with(marker: str) -> list[int]:
    """Live (non-zombie) PIDs whose environment holds ``marker`` (``NAME=VALUE``): a test's own
    processes, found by a unique value it gave them (see :func:`marked`)."""
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


def marked(name: str) -> tuple[dict[str, str], str]:
    """An environment ``{name: unique value}`` for a test's processes, and the ``NAME=VALUE``
    marker :func:`processes_with` finds them by."""
    value = uuid.uuid4().hex
    return {name: value}, f"{name}={value}"


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, step: float = 0.05) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes; returns its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


@pytest.fixture
def run_root(tmp_path: Path) -> str:
    return str(tmp_path / "runs")


@pytest.fixture(params=["local", "ssh"])
def host(request: pytest.FixtureRequest, run_root: str) -> Iterator[Host]:
    """The host layer over each transport."""
    if request.param == "local":
        opened = open_host(HostSpec(run_root=run_root, python=PYTHON))
    else:
        opened = open_host(ssh_spec(request.getfixturevalue("sshd"), run_root))
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def servers(host: Host) -> Iterator[list[ServerHandle]]:
    """Handles appended here are stopped after the test, whatever happened."""
    started: list[ServerHandle] = []
    yield started
    for handle in started:
        try:
            host.stop_server(handle, grace_s=1.0, wait_gpu_s=0.0, port_wait_s=5.0)
        except Exception:  # noqa: BLE001 - the host may be the thing that broke: kill directly
            for pid in group_members(handle.pgid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def fake_server_argv(*extra: str) -> list[str]:
    return [PYTHON, FAKE_SERVER, *extra]


def host_fields(host: Host, request: pytest.FixtureRequest) -> dict[str, object]:
    """HostSpec fields that reach ``host`` again from another process."""
    if isinstance(host, LocalHost):
        return {"address": "local", "run_root": host.run_root}
    sshd = request.getfixturevalue("sshd")
    return {
        "address": sshd.host,
        "port": sshd.port,
        "user": sshd.user,
        "key_path": sshd.key_path,
        "known_hosts": sshd.known_hosts_path,
        "run_root": host.run_root,
    }


def _tuner_command(spec: dict[str, object], action: str) -> tuple[list[str], dict[str, str]]:
    argv = [PYTHON, str(HERE / "killed_tuner.py"), json.dumps(spec), action]
    return argv, {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}


def run_killed_tuner(spec: dict[str, object], action: str) -> subprocess.CompletedProcess[bytes]:
    """Run ``killed_tuner.py`` until it kills itself; returns how it ended."""
    argv, env = _tuner_command(spec, action)
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, timeout=60, check=False)


@contextlib.contextmanager
def tuner_serving(
    spec: dict[str, object],
) -> Iterator[tuple[subprocess.Popen[bytes], ServerHandle]]:
    """A tuner process that started a server (its handle given) and waits; killed on exit."""
    argv, env = _tuner_command(spec, "serve")
    tuner = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE)
    try:
        assert tuner.stdout is not None
        line = tuner.stdout.readline()
        assert line, "the tuner process printed no handle"
        yield tuner, ServerHandle.from_record(json.loads(line))
    finally:
        tuner.kill()
        tuner.wait()
        if tuner.stdout is not None:
            tuner.stdout.close()
