"""SshHost against a real OpenSSH server on 127.0.0.1: keys, reuse, drops, ~/.ssh/config."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.host import fake_server_argv, group_members, ssh_spec, wait_until
from tests.support.sshd import SSHD_BINARY, SshServer, free_port
from tuner.errors import ConfigError, HostError
from tuner.host import HostSpec, SshHost, open_host

pytestmark = pytest.mark.sshd


@pytest.fixture
def own_sshd(tmp_path: Path) -> Iterator[SshServer]:
    """An sshd of this test alone, free to be restarted with a new host key or stopped."""
    if not os.access(SSHD_BINARY, os.X_OK):
        pytest.skip(f"{SSHD_BINARY} is missing: apt-get install -y openssh-server")
    server = SshServer(tmp_path / "own-sshd")
    try:
        server.start()
        yield server
    finally:
        server.stop()


def test_one_connection_is_reused_across_steps(sshd: SshServer, run_root: str) -> None:
    with open_host(ssh_spec(sshd, run_root)) as host:
        assert isinstance(host, SshHost)
        assert host.name == f"{sshd.user}@127.0.0.1:{sshd.port}"
        assert host.address == "127.0.0.1"
        for number in range(5):
            assert host.run(f"echo {number}").stdout == f"{number}\n"
        host.write_file(f"{run_root}/f", b"x")
        assert host.read_file(f"{run_root}/f") == b"x"
        assert host.connections == 1


def test_a_changed_host_key_is_refused_even_with_accept_new(
    own_sshd: SshServer, run_root: str
) -> None:
    with open_host(ssh_spec(own_sshd, run_root)) as host:
        assert host.run("true").ok
    own_sshd.restart(new_host_key=True)
    for accept_new in (False, True):
        with open_host(ssh_spec(own_sshd, run_root, accept_new_host_key=accept_new)) as host:
            with pytest.raises(HostError) as refused:
                host.run("true")
            message = str(refused.value)
            assert "host key CHANGED" in message and "ssh-keygen -R" in message
            assert "\n" not in message
    assert Path(own_sshd.known_hosts_path).read_text().count("\n") == 1  # nothing was recorded


def test_an_unknown_host_is_refused_unless_accept_new_is_set(
    sshd: SshServer, tmp_path: Path
) -> None:
    known_hosts = tmp_path / "empty_known_hosts"
    run_root = str(tmp_path / "runs")
    spec = ssh_spec(sshd, run_root, known_hosts=str(known_hosts))
    with open_host(spec) as host, pytest.raises(HostError, match="unknown.*accept_new_host_key"):
        host.run("true")
    assert not known_hosts.exists()
    with open_host(
        ssh_spec(sshd, run_root, known_hosts=str(known_hosts), accept_new_host_key=True)
    ) as host:
        assert host.run("true").ok
    recorded = known_hosts.read_text()
    host_key = Path(f"{sshd.host_key_path}.pub").read_text().split()[1]
    assert recorded.startswith(f"[127.0.0.1]:{sshd.port} ssh-ed25519 {host_key}")
    with open_host(ssh_spec(sshd, run_root, known_hosts=str(known_hosts))) as host:
        assert host.run("true").ok  # the recorded key is now checked and accepted


def test_ssh_config_alias_supplies_host_port_user_and_key(sshd: SshServer, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(
        f"Host gpu-box\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {sshd.key_path}\n  UserKnownHostsFile {sshd.known_hosts_path}\n"
    )
    spec = HostSpec(address="gpu-box", ssh_config=str(config), run_root=str(tmp_path / "r"))
    with open_host(spec) as host:
        assert host.name == f"{sshd.user}@127.0.0.1:{sshd.port}"
        assert host.run("echo via-alias").stdout == "via-alias\n"


def test_a_wrong_key_or_a_dead_port_is_one_clear_line(sshd: SshServer, tmp_path: Path) -> None:
    other_key = tmp_path / "other_key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)], check=True
    )
    wrong_key = ssh_spec(sshd, str(tmp_path), key_path=str(other_key))
    with open_host(wrong_key) as host, pytest.raises(HostError, match="authentication.*key_path"):
        host.run("true")
    dead_port = ssh_spec(sshd, str(tmp_path), port=free_port())
    with open_host(dead_port) as host, pytest.raises(HostError, match="cannot connect.*host.port"):
        host.run("true")
    with pytest.raises(ConfigError, match="host.key"):
        SshHost(ssh_spec(sshd, str(tmp_path), key_path=str(tmp_path / "missing")))


def test_a_dropped_connection_fails_the_call_then_reconnects_and_the_server_is_stopped(
    own_sshd: SshServer, run_root: str
) -> None:
    host = open_host(ssh_spec(own_sshd, run_root))
    handle = None
    try:
        handle = host.start_server(fake_server_argv(), env={}, run_dir=f"{run_root}/drop")
        assert host.is_running(handle)
        assert own_sshd.drop_connections() >= 1
        assert wait_until(lambda: host._connection is None or not host._connection.is_connected)
        with pytest.raises(HostError, match="connection was lost"):
            host.is_running(handle)  # the trial in progress learns of it
        assert host.is_running(handle)  # the next call reconnects; the detached server lived on
        assert host.connections == 2
        host.stop_server(handle, grace_s=2.0, wait_gpu_s=0.0)
        assert group_members(handle.pgid) == []
    finally:
        if handle is not None:
            for pid in group_members(handle.pgid):
                os.kill(pid, signal.SIGKILL)
        host.close()


def test_a_connection_lost_during_a_command_raises_and_sshd_restart_is_survived(
    own_sshd: SshServer, run_root: str
) -> None:
    with open_host(ssh_spec(own_sshd, run_root)) as host:
        assert host.run("true").ok
        outcome: list[BaseException | object] = []

        def long_command() -> None:
            try:
                outcome.append(host.run("sleep 6", timeout=30))
            except BaseException as error:  # noqa: BLE001 - handed to the test thread
                outcome.append(error)

        worker = threading.Thread(target=long_command)
        worker.start()
        assert wait_until(lambda: len(own_sshd.session_pids()) >= 1)
        own_sshd.restart()  # the listener and every session go away; a new sshd takes over
        worker.join(timeout=15)
        assert not worker.is_alive()
        assert isinstance(outcome[0], HostError) and "lost" in str(outcome[0])
        assert host.run("echo back").stdout == "back\n"
        own_sshd.stop()
        with pytest.raises(HostError):
            host.run("true")  # lost
        with pytest.raises(HostError, match="cannot connect"):
            host.run("true")  # and cannot come back: one attempt, one clear error
        own_sshd.start()
        host.reconnect()
        assert host.run("echo again").stdout == "again\n"
