"""The run root: per user (``~/...`` on the host), created 0700, refused when others can write it.

Runs on both transports (``host`` is local and over the session's sshd), and through ``tuner
optimize`` over sshd, which must exit 2 before it starts anything.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from tests.support.host import REPO
from tuner.errors import ConfigError
from tuner.host import Host, HostSpec, open_host
from tuner.host._run_root import DEFAULT_RUN_ROOT


def _mode(path: str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_missing_run_root_is_created_0700(host: Host) -> None:
    path = host.secure_run_root()
    assert os.path.isdir(path)
    assert _mode(path) == 0o700
    assert host.secure_run_root() == path  # again: accepted as it is


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o775, 0o757])
def test_a_run_root_writable_by_group_or_others_is_refused(host: Host, mode: int) -> None:
    os.makedirs(host.run_root)
    os.chmod(host.run_root, mode)
    with pytest.raises(ConfigError) as error:
        host.secure_run_root()
    message = str(error.value)
    assert "\n" not in message
    assert f"writable by group or others (mode {mode:04o})" in message
    assert f"chmod 700 {host.run_root}" in message


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_a_run_root_of_another_user_is_refused(host: Host) -> None:
    os.makedirs(host.run_root, mode=0o700)
    os.chown(host.run_root, 65534, 65534)  # nobody
    with pytest.raises(ConfigError, match="is owned by .*not by the tuner's user"):
        host.secure_run_root()


def test_the_default_run_root_is_in_the_host_users_home(host: Host) -> None:
    assert HostSpec().run_root == DEFAULT_RUN_ROOT == "~/.cache/tuner/runs"
    relative = f".cache/tuner-test-{uuid.uuid4().hex[:8]}"
    host.run_root = f"~/{relative}/runs"
    try:
        path = host.secure_run_root()
        assert path == str(Path.home() / relative / "runs")
        assert _mode(path) == 0o700
    finally:
        shutil.rmtree(Path.home() / relative, ignore_errors=True)


@pytest.mark.sshd
@pytest.mark.parametrize("mode", [0o777, 0o770, 0o775, 0o757])
def test_optimize_refuses_a_shared_run_root_with_exit_2(tmp_path: Path, sshd, mode: int) -> None:
    from tuner.emulator.host_root import prepare_host_root

    env = prepare_host_root(tmp_path / "host")
    shared = tmp_path / "shared-runs"
    shared.mkdir()
    shared.chmod(mode)
    document = yaml.safe_load((REPO / "search_spaces/glm5.yaml").read_text())
    document["host"] = {"address": "127.0.0.1", "user": sshd.user, "port": sshd.port,
                        "key": sshd.key_path, "python": sys.executable, "run_root": str(shared)}
    document["server"]["command"] = f"{sys.executable} -m tuner.emulator --time-scale 200"
    document["server"]["env"] = env
    space = tmp_path / "shared.yaml"
    space.write_text(yaml.safe_dump(document, sort_keys=False))
    done = subprocess.run(
        [sys.executable, "-m", "tuner", "optimize", str(space), "--trials", "1",
         "--known-hosts", sshd.known_hosts_path, "--storage", f"sqlite:///{tmp_path / 's.db'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if "error" in line]
    assert len(lines) == 1 and f"writable by group or others (mode {mode:04o})" in lines[0], done.stderr
    assert list(shared.iterdir()) == []  # not even the claim was written
