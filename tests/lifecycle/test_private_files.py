"""What the tuner creates on the host for a run is private from the moment it exists.

On both transports (``host`` is local and over the session's real sshd on 127.0.0.1): a server
command (``stat_server.py``) records, while it runs, the modes of its ``--config`` secret file,
its run folder, that folder's parent and its own log, then prints the secret and dies at start.
The secret file is gone afterwards, whether the start failed after the spawn or before a server
handle existed, and the failure the session reports shows ``***``, never the secret.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.support.host import HERE, PYTHON
from tests.support.sshd import free_port
from tuner.engines import load_profile
from tuner.errors import ConfigError, ServerFailure
from tuner.host import Host
from tuner.lifecycle import ServerSession

STAT_SERVER = str(HERE / "stat_server.py")
API_KEY = "sk-private-test-6a2f90d1"


def _mode(path: str | Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def _session(host: Host, run_dir: str, argv: list[str], env: dict[str, str]) -> ServerSession:
    port = free_port()
    return ServerSession(host, load_profile("sglang"),
                         [*argv, "--host", "127.0.0.1", "--port", str(port)], env, port, run_dir,
                         stop_grace_s=1.0, secret_flags={"--api-key": API_KEY})


def test_the_secret_file_run_folder_and_log_are_private_while_the_server_runs(
    host: Host, tmp_path: Path
) -> None:
    host.secure_run_root()
    run_dir = f"{host.run_root}/study/trial-0000"
    seen = tmp_path / "seen.json"
    session = _session(host, run_dir, [PYTHON, STAT_SERVER, str(seen)], {})
    with pytest.raises(ServerFailure) as failed:
        with session:
            session.wait_ready(30)
    assert json.loads(seen.read_text()) == {
        "config": "0600", "run_dir": "0700", "run_dir_parent": "0700", "log": "0600",
        "umask": "0022",  # the server itself runs under the usual umask
    }
    assert sorted(os.listdir(run_dir)) == ["server.json", "server.log"]  # no secret file left
    assert all(_mode(Path(run_dir) / name) == 0o600 for name in os.listdir(run_dir))
    failure = failed.value
    assert failure.reason == "startup-crash"
    assert 'server_args: api-key: "***"' in failure.excerpt
    assert API_KEY not in f"{failure} {failure.excerpt} {session.log_excerpt()}"
    assert API_KEY in (Path(run_dir) / "server.log").read_text()  # what the server printed


def test_a_start_that_fails_before_a_server_exists_leaves_no_secret_file(
    host: Host, tmp_path: Path
) -> None:
    host.secure_run_root()
    run_dir = f"{host.run_root}/study/trial-0001"
    session = _session(host, run_dir, [PYTHON, STAT_SERVER, str(tmp_path / "seen.json")],
                       {"NOT-A-NAME": "x"})  # the start script refuses it: no server, no handle
    with pytest.raises(ConfigError, match="NOT-A-NAME"):
        with session:
            pass
    assert session.handle is None
    assert os.listdir(run_dir) == []
    assert _mode(run_dir) == 0o700 and _mode(Path(run_dir).parent) == 0o700


def test_a_new_file_is_created_0600_in_folders_created_0700(host: Host) -> None:
    host.secure_run_root()
    path = f"{host.run_root}/patch-journal/deeper/patch-journal.json"
    host.write_file(path, b"{}")
    assert _mode(path) == 0o600
    assert _mode(Path(path).parent) == 0o700 and _mode(Path(path).parent.parent) == 0o700
    host.write_file(path, b"{}", mode=0o640)  # a mode asked for is given
    assert _mode(path) == 0o640
    assert [name for name in os.listdir(Path(path).parent) if name.startswith(".")] == []
