"""First contact: the shipped glm5.yaml, its placeholder host untouched, run as the README says."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.study.conftest import GLM5
from tuner.study.trial import is_placeholder


def tuner(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m tuner ARGS`` in an empty folder, with an empty home (no ~/.ssh at all)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env={**os.environ, "HOME": str(home)}, check=False)


@pytest.mark.parametrize("command", [["optimize", str(GLM5), "--trials", "40"],
                                     ["doctor", str(GLM5)]], ids=lambda c: c[0])
def test_the_placeholder_host_is_named_with_both_fixes(tmp_path: Path,
                                                       command: list[str]) -> None:
    result = tuner(tmp_path, *command)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert f"{GLM5}:" in line and "host.address" in line
    assert "'gpu-host' is the shipped placeholder" in line
    assert "--host user@address" in line and "--emulate" in line
    assert not (tmp_path / "studies").exists()  # nothing made, no host opened


def test_host_on_the_command_line_gets_past_the_placeholder(tmp_path: Path) -> None:
    result = tuner(tmp_path, "doctor", str(GLM5), "--host", "root@127.0.0.1:1",
                   "--ssh-key", str(tmp_path / "no-such-key"))
    assert result.returncode == 2 and "placeholder" not in result.stderr
    assert "no-such-key does not exist" in result.stderr  # it went on to open that host


def test_a_gpu_host_alias_or_hosts_entry_is_a_real_machine(tmp_path: Path) -> None:
    config, hosts = tmp_path / "ssh_config", tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n# 10.0.0.5 gpu-host\n")
    assert is_placeholder("gpu-host", ssh_config=config, hosts=hosts)
    config.write_text("Host gpu-host\n  HostName 10.0.0.5\n  User me\n")
    assert not is_placeholder("gpu-host", ssh_config=config, hosts=hosts)
    config.write_text("Host other\n  HostName 10.0.0.6\n")
    assert is_placeholder("gpu-host", ssh_config=config, hosts=hosts)
    hosts.write_text("10.0.0.5 gpu-host gpu\n")
    assert not is_placeholder("gpu-host", ssh_config=config, hosts=hosts)
    assert not is_placeholder("my-box", ssh_config=config, hosts=tmp_path / "none")
