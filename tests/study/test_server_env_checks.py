"""The preflight checks run in the server's environment: a PYTHONPATH (or PATH) given only in
``server.env`` is seen by ``doctor`` and ``optimize`` as the server sees it, over the real sshd."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.study.conftest import GLM5, REPO
from tests.support.studies import QUICK
from tests.support.sshd import free_port

pytestmark = pytest.mark.sshd


def space_with_env_only_in_server_env(tmp_path: Path, sshd) -> Path:
    """glm5.yaml on the stand-in host over sshd: sglang (the emulator's stand-in) is importable
    only with the PYTHONPATH of ``server.env``; the SSH session has none."""
    from tuner.emulator.host_root import prepare_host_root

    host_env = prepare_host_root(tmp_path / "host")
    document = yaml.safe_load(GLM5.read_text())
    document["name"] = "envonly"
    document["host"] = {"address": "127.0.0.1", "user": sshd.user, "port": sshd.port,
                        "key": sshd.key_path, "python": sys.executable,
                        "run_root": str(tmp_path / "runs")}
    document["server"]["command"] = f"{sys.executable} -m sglang.launch_server --time-scale 200"
    document["server"]["port"] = free_port()
    document["server"]["env"] = {
        **document["server"]["env"],
        "PYTHONPATH": f"{host_env['PYTHONPATH']}:{REPO}",  # the stand-in sglang, and tuner
        "PATH": host_env["PATH"],  # the stand-in nvidia-smi first
        "TUNER_EMULATOR_STATE": host_env["TUNER_EMULATOR_STATE"],
    }
    workload = {**document["workload"], **QUICK, "levels": [64, 256]}  # a short trial
    for key in ("emulated", "time_scale", "stream_interval"):
        workload.pop(key, None)
    document["workload"] = workload
    path = tmp_path / "envonly.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_doctor_sees_the_package_through_server_env(tmp_path: Path, sshd) -> None:
    space = space_with_env_only_in_server_env(tmp_path, sshd)
    bare = subprocess.run(  # the SSH session alone does not import sglang
        ["ssh", "-p", str(sshd.port), "-i", sshd.key_path, "-o",
         f"UserKnownHostsFile={sshd.known_hosts_path}", "-o", "BatchMode=yes",
         f"{sshd.user}@127.0.0.1", f"{sys.executable} -c 'import sglang'"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False)
    assert bare.returncode != 0 and "No module named 'sglang'" in bare.stderr
    result = subprocess.run(
        [sys.executable, "-m", "tuner", "doctor", str(space), "--known-hosts",
         sshd.known_hosts_path], cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={**os.environ, "COLUMNS": "200"}, stdin=subprocess.DEVNULL, check=False)
    out = result.stdout
    assert "PASS engine version: installed 0.5.9" in out, out + result.stderr
    assert "PASS flags known" in out, out
    assert "PASS patch autotune_gate: applies to" in out, out
    assert "PASS patch force_allreduce_fusion: applies to" in out, out
    assert str(tmp_path / "host") in out  # the package found where server.env points
    assert "no nvidia-smi" not in out  # the stand-in nvidia-smi on server.env's PATH
    assert result.returncode == 0, out + result.stderr


def test_optimize_runs_a_trial_with_the_package_only_in_server_env(tmp_path: Path, sshd) -> None:
    space = space_with_env_only_in_server_env(tmp_path, sshd)
    result = subprocess.run(
        [sys.executable, "-m", "tuner", "optimize", str(space), "--trials", "1",
         "--known-hosts", sshd.known_hosts_path, "--storage", f"sqlite:///{tmp_path / 's.db'}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={**os.environ, "COLUMNS": "200"}, stdin=subprocess.DEVNULL, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "does not import" not in result.stdout + result.stderr
    assert "not found" not in result.stdout + result.stderr
