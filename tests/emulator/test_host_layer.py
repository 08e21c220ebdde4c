"""The emulator launched through the host layer, locally and over a real sshd, exactly as SGLang
would be: ``python3 -m sglang.launch_server ...`` with the emulated host's environment, detached,
its log followed, served to the tuner's client, and stopped with the GPUs seen free."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.emulator import BASE_ARGV, get_json, patch_gate
from tests.support.sshd import free_port
from tuner.emulator import prepare_host_root
from tuner.host import Host, HostSpec, open_host
from tuner.loadgen import LevelSpec, run_level

READY = "The server is fired up and ready to roll!"


@pytest.fixture(params=["local", "ssh"])
def host(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Host]:
    run_root = str(tmp_path / "runs")
    if request.param == "local":
        spec = HostSpec(run_root=run_root)
    else:
        sshd = request.getfixturevalue("sshd")
        spec = HostSpec(address=sshd.host, port=sshd.port, user=sshd.user,
                        key_path=sshd.key_path, known_hosts=sshd.known_hosts_path,
                        run_root=run_root)
    opened = open_host(spec)
    try:
        yield opened
    finally:
        opened.close()


def follow_until(host: Host, handle, text: str, timeout: float = 60.0) -> str:
    """The server's log up to ``text`` (read the way the lifecycle reads it)."""
    log, offset = "", 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        chunk, offset = host.read_log(handle, offset)
        log += chunk
        if text in log:
            return log
        assert host.is_running(handle), log[-2000:]
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in the log within {timeout} s:\n{log[-2000:]}")


def test_sglang_launch_server_on_the_emulated_host(host: Host, tmp_path: Path) -> None:
    env = prepare_host_root(tmp_path / "host")
    patch_gate(tmp_path / "host/site")
    port = free_port()
    argv = ["python3", "-m", "sglang.launch_server", *BASE_ARGV, "--host", "127.0.0.1",
            "--port", str(port), "--time-scale", "100", "--stream-interval", "8"]
    handle = host.start_server(argv, env=env, run_dir=f"{host.run_root}/trial-0")
    try:
        log = follow_until(host, handle, READY)
        assert "Running FlashInfer autotune..." in log and "KV Cache is allocated." in log
        base = f"http://127.0.0.1:{port}"
        info = get_json(f"{base}/server_info")[1]
        assert info["emulator"]["emulated"] is True and info["emulator"]["time_scale"] == 100.0
        spec = LevelSpec(concurrency=32, num_requests=64, input_len=256, output_len=64,
                         time_limit_s=3000)
        level = asyncio.run(run_level(base, spec, api="sglang"))
        assert level.completed == 64 and level.emulated and level.output_throughput > 0
        apps = host.run("nvidia-smi --query-compute-apps=pid --format=csv,noheader", env=env)
        assert apps.stdout.split() == [str(handle.pid)] * 8
    finally:
        host.stop_server(handle, grace_s=5.0, env=env, wait_gpu_s=10.0, port_wait_s=10.0)
    assert not host.is_running(handle) and host.port_free(port)
    apps = host.run("nvidia-smi --query-compute-apps=pid --format=csv,noheader", env=env)
    assert apps.ok and apps.stdout.strip() == ""
    record = json.loads(host.read_file(f"{host.run_root}/trial-0/server.json"))
    assert record["argv"][:3] == ["python3", "-m", "sglang.launch_server"]
