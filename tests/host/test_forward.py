"""A remote server binds 127.0.0.1; the tuner's client reaches it through a port forwarded over
the SSH connection it holds (real sshd on 127.0.0.1, the emulated server, the real client)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.support.emulator import BASE_ARGV
from tests.support.host import ssh_spec
from tests.support.sshd import free_port
from tuner.emulator import prepare_host_root
from tuner.engines import load_profile
from tuner.host import open_host
from tuner.lifecycle import ServerSession
from tuner.loadgen import LevelSpec, run_level

pytestmark = pytest.mark.sshd


def listening_addresses(port: int) -> set[str]:
    """The local addresses (hex, as /proc/net/tcp* writes them) with a listener on ``port``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, _, hex_port = fields[1].rpartition(":")
            if fields[3] == "0A" and int(hex_port, 16) == port:
                found.add(address)
    return found


def _argv(port: int, bind: str) -> list[str]:
    return ["python3", "-m", "sglang.launch_server", *BASE_ARGV, "--host", bind, "--port",
            str(port), "--time-scale", "200", "--disable-cuda-graph"]


def test_the_client_reaches_a_loopback_server_through_the_ssh_forward(tmp_path: Path, sshd) -> None:
    env = prepare_host_root(tmp_path / "host")
    # forward: true, since this sshd's 127.0.0.1 is the test's own (auto would connect directly)
    host = open_host(ssh_spec(sshd, str(tmp_path / "runs"), forward=True))
    port = free_port()
    try:
        session = ServerSession(host, load_profile("sglang"), _argv(port, "127.0.0.1"), env, port,
                                f"{host.run_root}/trial-0", stop_grace_s=5.0)
        with session:
            session.wait_ready(60)
            assert listening_addresses(port) == {"0100007F"}  # 127.0.0.1 only
            url = session.base_url
            assert url.startswith("http://127.0.0.1:") and not url.endswith(f":{port}")
            forward_port = int(url.rsplit(":", 1)[1])
            assert listening_addresses(forward_port) == {"0100007F"}
            spec = LevelSpec(concurrency=256, num_requests=512, input_len=128, output_len=32,
                             time_limit_s=3000)
            level = asyncio.run(run_level(url, spec, api="sglang"))
            assert level.completed == 512 and level.failed == 0
            forward = next(iter(host._forwards.values()))
            assert forward.channels >= 256  # every stream went through the SSH connection
    finally:
        host.close()


def test_a_host_on_this_machines_loopback_is_reached_directly_unless_asked(tmp_path: Path, sshd) -> None:
    auto = open_host(ssh_spec(sshd, str(tmp_path / "runs")))
    try:
        assert auto.client_url(30000, "127.0.0.1") == "http://127.0.0.1:30000"
        assert auto._forwards == {}
    finally:
        auto.close()


def test_bind_all_when_asked_is_reached_directly(tmp_path: Path, sshd) -> None:
    env = prepare_host_root(tmp_path / "host")
    host = open_host(ssh_spec(sshd, str(tmp_path / "runs"), forward=True))
    port = free_port()
    try:
        session = ServerSession(host, load_profile("sglang"), _argv(port, "0.0.0.0"), env, port,
                                f"{host.run_root}/trial-0", stop_grace_s=5.0)
        with session:
            session.wait_ready(60)
            assert listening_addresses(port) == {"00000000"}
            assert session.base_url == f"http://127.0.0.1:{port}"  # host.address, no forward
            assert host._forwards == {}
    finally:
        host.close()
