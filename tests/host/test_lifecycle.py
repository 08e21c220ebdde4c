"""A detached server's life on a host, locally and over a real sshd: start, follow, stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.host import (
    PYTHON,
    fake_server_argv,
    group_members,
    host_fields,
    marked,
    processes_with,
    tuner_serving,
    wait_until,
)
from tests.support.sshd import free_port
from tuner.errors import HostError
from tuner.host import Host, ServerHandle


def _record(path: Path, timeout: float = 10.0) -> dict:
    assert wait_until(path.exists, timeout), f"the server never wrote {path}"
    return json.loads(path.read_text())


def test_server_runs_detached_in_its_own_group_and_stop_leaves_nothing(
    host: Host, servers: list[ServerHandle], tmp_path: Path
) -> None:
    port = free_port()
    record = tmp_path / "record.json"
    handle = host.start_server(
        fake_server_argv("--port", str(port), "--child", "--record", str(record)),
        env={},
        run_dir=f"{host.run_root}/study/trial-0000",
    )
    servers.append(handle)
    seen = _record(record)
    assert seen["pid"] == handle.pid and seen["pgid"] == handle.pid  # own process group
    assert handle.port == port  # taken from --port
    assert wait_until(lambda: len(group_members(handle.pgid)) == 2)  # the server and its child
    assert wait_until(lambda: not host.port_free(port))
    assert host.is_running(handle)
    run_dir = Path(handle.run_dir)
    assert (run_dir / "server.pid").read_text().strip() == str(handle.pid)
    assert ServerHandle.from_record(json.loads((run_dir / "server.json").read_text())) == handle

    host.stop_server(handle, grace_s=5.0, wait_gpu_s=0.0)

    assert group_members(handle.pgid) == []  # the child went with it
    assert host.port_free(port)
    assert not host.is_running(handle)
    assert not (run_dir / "server.pid").exists()
    host.stop_server(handle, grace_s=1.0)  # idempotent


def test_read_log_follows_appended_text_without_cutting_characters(
    host: Host, servers: list[ServerHandle]
) -> None:
    handle = host.start_server(
        fake_server_argv("--lines", "40"), env={}, run_dir=f"{host.run_root}/log"
    )
    servers.append(handle)
    text, offset, reads = "", 0, 0
    deadline = time.monotonic() + 15
    while "line 39 é€" not in text and time.monotonic() < deadline:
        chunk, offset = host.read_log(handle, offset)
        text += chunk
        reads += 1
        time.sleep(0.02)
    assert reads > 1  # it really followed a growing file
    lines = text.splitlines()
    assert lines[0] == "fake server ready"
    assert lines[1:] == [f"line {n} é€" for n in range(40)]
    assert offset == len(text.encode())
    assert host.read_log(handle, offset) == ("", offset)


def test_a_server_killed_with_sigkill_is_seen_as_not_running(
    host: Host, servers: list[ServerHandle], tmp_path: Path
) -> None:
    record = tmp_path / "record.json"
    handle = host.start_server(
        fake_server_argv("--record", str(record)), env={}, run_dir=f"{host.run_root}/killed"
    )
    servers.append(handle)
    _record(record)
    assert host.is_running(handle)
    os.kill(handle.pid, signal.SIGKILL)
    # the kernel may leave a zombie for a while: the state letter, not kill -0, decides
    assert wait_until(lambda: not host.is_running(handle), timeout=2.0)


def test_a_zombie_counts_as_dead(host: Host) -> None:
    child = subprocess.Popen(["sleep", "30"])  # our child: a zombie until we wait for it
    try:
        stat = Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()
        handle = ServerHandle(
            pid=child.pid,
            pgid=child.pid,
            starttime=stat[19],
            boot_id="",
            run_dir="/nonexistent",
            log_path="/nonexistent/log",
        )
        assert host.is_running(handle)
        child.kill()
        assert wait_until(
            lambda: Path(f"/proc/{child.pid}/stat").read_text().split(") ")[1][0] == "Z"
        )
        assert not host.is_running(handle)
    finally:
        child.kill()
        child.wait()


def test_sigterm_ignored_means_sigkill_after_the_grace_period(
    host: Host, servers: list[ServerHandle], tmp_path: Path
) -> None:
    record = tmp_path / "record.json"
    handle = host.start_server(
        fake_server_argv("--ignore-term", "--record", str(record)),
        env={},
        run_dir=f"{host.run_root}/stubborn",
    )
    servers.append(handle)
    _record(record)
    started = time.monotonic()
    host.stop_server(handle, grace_s=1.0, wait_gpu_s=0.0)
    elapsed = time.monotonic() - started
    assert group_members(handle.pgid) == []
    assert 1.0 <= elapsed < 10.0  # waited the grace period, then killed


def test_stop_command_stops_a_server_that_signals_would_not_reach(
    host: Host, servers: list[ServerHandle], tmp_path: Path
) -> None:
    stop_file = tmp_path / "container-stop"
    handle = host.start_server(
        fake_server_argv("--ignore-term", "--stop-file", str(stop_file)),
        env={},
        run_dir=f"{host.run_root}/container",
    )
    servers.append(handle)
    host.stop_server(handle, grace_s=10.0, stop_command=f"touch '{stop_file}'", wait_gpu_s=0.0)
    assert group_members(handle.pgid) == []
    log, _ = host.read_log(handle, 0)
    assert "stop file seen: exiting cleanly" in log  # the stop command did it, not SIGKILL
    stop_file.unlink()
    host.stop_server(handle, grace_s=1.0, stop_command=f"touch '{stop_file}'", wait_gpu_s=0.0)
    assert stop_file.exists()  # run even with the client gone: a container can outlive it


def test_stop_waits_for_the_port_and_reports_a_port_that_stays_busy(
    host: Host, servers: list[ServerHandle]
) -> None:
    handle = host.start_server(fake_server_argv(), env={}, run_dir=f"{host.run_root}/port")
    servers.append(handle)
    port = free_port()
    squatter = subprocess.Popen(
        [
            PYTHON,
            "-c",
            (
                f"import socket, time; s = socket.socket(); s.bind(('127.0.0.1', {port})); "
                "s.listen(); time.sleep(60)"
            ),
        ]
    )
    try:
        assert wait_until(lambda: not host.port_free(port))
        with pytest.raises(HostError, match=f"port {port} still in use"):
            host.stop_server(handle, grace_s=1.0, port=port, port_wait_s=0.5, wait_gpu_s=0.0)
        assert group_members(handle.pgid) == []  # the server itself is gone all the same
    finally:
        squatter.kill()
        squatter.wait()
    assert wait_until(lambda: host.port_free(port))


def test_a_reused_pid_is_never_signalled(host: Host, run_root: str) -> None:
    bystander = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        stale = ServerHandle(
            pid=bystander.pid,
            pgid=bystander.pid,
            starttime="1",
            boot_id="",
            run_dir=f"{run_root}/stale",
            log_path=f"{run_root}/stale/log",
        )
        assert not host.is_running(stale)
        host.stop_server(stale, grace_s=0.5, wait_gpu_s=0.0)
        assert bystander.poll() is None  # same PID, another process: untouched
        Path(stale.run_dir).mkdir(parents=True)
        Path(stale.run_dir, "server.pid").write_text(f"{bystander.pid}\n")
        Path(stale.run_dir, "server.json").write_text(stale.to_json())
        assert host.find_orphans() == []
    finally:
        bystander.kill()
        bystander.wait()


def test_orphans_of_a_killed_tuner_are_found_and_stopped_and_nothing_else(
    host: Host, servers: list[ServerHandle], request: pytest.FixtureRequest
) -> None:
    own = host.start_server(fake_server_argv(), env={}, run_dir=f"{host.run_root}/mine/trial-1")
    servers.append(own)
    spec = {
        "host": host_fields(host, request),
        "argv": fake_server_argv(),
        "run_dir": f"{host.run_root}/s/trial-0003",
    }
    with tuner_serving(spec) as (tuner, handle):
        servers.append(handle)
        assert wait_until(lambda: host.is_running(handle))
        assert host.find_orphans() == []  # its tuner still runs: not an orphan
        tuner.kill()
        tuner.wait()
        assert host.find_orphans() == [handle]  # the tuner is gone: now it is one
    assert host.is_running(handle)  # the server outlived its tuner
    host.stop_server(handle, grace_s=2.0, wait_gpu_s=0.0)
    assert group_members(handle.pgid) == []
    assert host.find_orphans() == []
    assert host.is_running(own)  # a server of this (live) tuner was never an orphan
    record_path = Path(own.run_dir) / "server.json"
    record = json.loads(record_path.read_text())
    record["owner"] = {"host": "another-tuner-machine", "pid": 1, "starttime": "1"}
    record_path.write_text(json.dumps(record))
    assert host.find_orphans() == []  # owned from a machine we cannot see: left alone


def test_shell_metacharacters_reach_the_server_unchanged_and_run_nothing(
    host: Host, servers: list[ServerHandle], tmp_path: Path
) -> None:
    pwned = tmp_path / "pwned"
    values = [
        f"'; touch {pwned} #",
        f"$(touch {pwned})",
        f"`touch {pwned}`",
        "a b  c",
        "\"double\" 'single'",
        "back\\slash",
        "semi;colon&amp|pipe>redirect<",
        "*",
        "$HOME",
        "new\nline",
        f"{pwned}; rm -rf /tmp/x",
    ]
    record = tmp_path / "argv.json"
    argv = fake_server_argv(
        "--record", str(record), "--env-names", "TUNER_TEST_VALUE", "--", *values
    )
    env = {"TUNER_TEST_VALUE": f"$(touch {pwned}) `id` '\"; x"}
    handle = host.start_server(argv, env=env, run_dir=f"{host.run_root}/meta; touch {pwned}")
    servers.append(handle)
    seen = _record(record)
    assert seen["argv"] == argv[1:]  # sys.argv starts at the script
    assert seen["env"] == env
    assert host.run(f"echo {pwned}").stdout.strip() == str(pwned)
    assert not pwned.exists()


def test_files_round_trip_keep_their_mode_and_fetch_copies(host: Host, tmp_path: Path) -> None:
    path = f"{host.run_root}/files/data.bin"
    payload = bytes(range(256)) * 40
    host.write_file(path, payload)
    os.chmod(path, 0o754)
    host.write_file(path, payload[::-1])
    assert host.read_file(path) == payload[::-1]
    assert os.stat(path).st_mode & 0o777 == 0o754
    assert host.exists(path) and not host.exists(path + ".missing")
    local = tmp_path / "fetched" / "copy.bin"
    host.fetch(path, str(local))
    assert local.read_bytes() == payload[::-1]
    with pytest.raises(HostError):
        host.read_file(path + ".missing")


def test_run_reports_exit_code_and_output_and_times_out(host: Host) -> None:
    result = host.run("echo out; echo err >&2; exit 3", env={"X_VALUE": "it's"})
    assert (result.exit_code, result.stdout, result.stderr, result.ok) == (
        3,
        "out\n",
        "err\n",
        False,
    )
    assert host.run('printf %s "$X_VALUE"', env={"X_VALUE": "it's $(id)"}).stdout == "it's $(id)"
    # The timeout is honoured, not the command's length: on a loaded machine the call may take
    # seconds more than 0.5, never the command's 60 s.
    env, marker = marked("TUNER_TEST_TIMEOUT")
    started = time.monotonic()
    try:
        with pytest.raises(HostError, match="timed out"):
            host.run("sleep 60 & sleep 61", timeout=0.5, env=env)
        took = time.monotonic() - started
        assert took < 30, f"the call waited {took:.1f} s for the command"
        # Locally and over SSH alike, the timed-out command is killed with its group (its child
        # in the background too): nothing it started is left running on the host.
        assert wait_until(lambda: not processes_with(marker), timeout=10.0), processes_with(marker)
        # The host is still usable, and a command's own stderr comes back as it wrote it.
        again = host.run("echo late >&2; echo fine")
        assert (again.exit_code, again.stdout, again.stderr) == (0, "fine\n", "late\n")
    finally:  # should the kill fail: this test's own processes, found by their marker
        for pid in processes_with(marker):
            os.kill(pid, signal.SIGKILL)


def test_cleanup_removes_only_old_run_folders(
    host: Host, servers: list[ServerHandle], run_root: str
) -> None:
    root = Path(run_root)
    old = time.time() - 10 * 86400
    for number in range(5):
        folder = root / f"run-{number}"
        folder.mkdir(parents=True)
        (folder / "server.log").write_text("log")
        os.utime(folder, (old + number, old + number))
    (root / ".telemetry").mkdir()
    (root / "patch-journal").mkdir()
    (root / "patch-journal" / "patch-journal.json").write_text("{}")
    for kept in (".telemetry", "patch-journal"):
        os.utime(root / kept, (old, old))
    handle = host.start_server(fake_server_argv(), env={}, run_dir=f"{run_root}/run-0/trial-0000")
    servers.append(handle)
    os.utime(root / "run-0", (old, old))
    (root / "fresh").mkdir()

    removed = host.cleanup_run_dirs(keep=3)

    assert sorted(Path(p).name for p in removed) == ["run-1", "run-2"]
    assert sorted(p.name for p in root.iterdir()) == [
        ".telemetry",
        "fresh",
        "patch-journal",
        "run-0",
        "run-3",
        "run-4",
    ]
