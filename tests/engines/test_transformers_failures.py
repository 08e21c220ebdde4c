"""transformers serve's failures through the real watcher (tuner/engines/transformers.yaml), from
its own captured logs and a real port conflict: a refused flag value is the configuration's
crash, a KV cache that does not fit is out of memory, a taken port is the machine's problem."""

from __future__ import annotations

import shlex
import socket
from pathlib import Path

import pytest

from tests.support.host import PYTHON
from tests.support.sshd import free_port
from tuner.engines import load_profile
from tuner.errors import ServerFailure
from tuner.host import HostSpec, open_host
from tuner.lifecycle import ServerSession

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests/fixtures/transformers"
STRICT_SERVER = REPO / "tests/support/strict_openai_server.py"


def _failure(argv: list[str], run_root: str, port: int, *, after_ready: bool = False,
             released: socket.socket | None = None) -> ServerFailure:
    """The watcher's verdict on a server started with ``argv``: while it starts, or (with
    ``after_ready``) once the probe's first request ran; ``released`` is closed before the stop
    (a port holder that went away, so the stop's wait for the port ends)."""
    host = open_host(HostSpec(run_root=run_root, python=PYTHON))
    try:
        session = ServerSession(host, load_profile("transformers"), argv, {}, port,
                                f"{run_root}/trial", stop_grace_s=2.0, poll_s=0.1)
        with session:
            if after_ready:
                session.wait_ready(60)  # /health would answer: the worker starts later
                session.phase = "probe"
                failure = session.wait_for_failure(30)
            else:
                with pytest.raises(ServerFailure) as failed:
                    session.wait_ready(60)
                failure = failed.value
            if released is not None:
                released.close()
    finally:
        host.close()
    assert failure is not None
    return failure


def _replay(log: str, then: str) -> list[str]:
    """A server that writes a captured log, then ``then`` (``exit 1``: it died; ``sleep 60``)."""
    return ["sh", "-c", f"cat {shlex.quote(str(FIXTURES / log))}; {then}"]


def test_a_refused_attention_implementation_is_a_startup_crash(tmp_path: Path) -> None:
    failure = _failure(_replay("serve-paged-bad.log", "exit 1"), str(tmp_path / "runs"),
                       free_port())
    assert failure.reason == "startup-crash"
    assert failure.detail.startswith("ValueError: Unsupported attention implementation: 'sdpa_paged'")


def test_a_kv_cache_that_does_not_fit_is_out_of_memory(tmp_path: Path) -> None:
    # Ready, then the worker dies at the first request; the process lives on and answers 503.
    failure = _failure(_replay("serve-oom-blocks.log", "sleep 60"), str(tmp_path / "runs"),
                       free_port(), after_ready=True)
    assert failure.reason == "oom-at-start"
    assert "No positive solution" in failure.detail


def test_a_port_held_by_another_process_is_a_host_error(tmp_path: Path) -> None:
    holder = socket.socket()  # another server, left running on the trial's port
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    argv = [PYTHON, str(STRICT_SERVER), "/tmp/model", "--host", "127.0.0.1",
            "--port", str(port), "--continuous-batching"]
    try:
        failure = _failure(argv, str(tmp_path / "runs"), port, released=holder)
    finally:
        holder.close()
    assert failure.reason == "host-error"
    assert "address already in use" in failure.detail
