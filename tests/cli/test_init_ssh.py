"""``tuner init --host``: the host read over a real sshd on 127.0.0.1, and a host that does not
answer (what was assumed is said in the file and on the terminal)."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tuner.emulator.host_root import prepare_host_root
from tuner.init._emulated import EMULATED_MODEL, lay_out_model
from tuner.space import load_space

REPO = Path(__file__).resolve().parents[2]


def tuner(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=cwd, text=True, capture_output=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)}, stdin=subprocess.DEVNULL, check=False)


@pytest.mark.sshd
def test_the_host_is_read_over_ssh(sshd, tmp_path: Path) -> None:
    """SGLang (the emulated host's stand-in 0.5.9, its own Python and PYTHONPATH given in the
    command, as a venv's would be) and the model's config.json, read through SSH; the host has
    no nvidia-smi on the login PATH, which the file says."""
    root = tmp_path / "host"
    site = prepare_host_root(root)["PYTHONPATH"]
    lay_out_model(root)
    model = str(root / EMULATED_MODEL.lstrip("/"))
    command = (f"PYTHONPATH={site} {root / 'bin' / 'python3'} -m sglang.launch_server --model-path {model} "
               "--tp-size 8 --max-running-requests 64")
    done = tuner("init", "--out", "over-ssh.yaml", "--host", f"{sshd.user}@{sshd.host}:{sshd.port}",
                 "--ssh-key", sshd.key_path, "--known-hosts", sshd.known_hosts_path, "--",
                 *shlex.split(command), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"read {sshd.user}@{sshd.host}:{sshd.port}: sglang 0.5.9, 0 GPU(s)" in done.stderr
    assert "note: no nvidia-smi on the host" in done.stderr
    space = load_space(tmp_path / "over-ssh.yaml")
    assert space.engine_version == "0.5.9"
    assert space.model.host.address == sshd.host and space.model.host.port == sshd.port
    assert space.model.host.python == str(root / "bin" / "python3")
    assert "moe_runner_backend" in space.parameters  # config.json read over SSH: an MoE model
    assert "cuda_graph" not in space.parameters  # no GPUs read
    assert space.model.server.env == {"PYTHONPATH": site}


def test_a_host_that_does_not_answer_is_assumed_and_said(tmp_path: Path) -> None:
    done = tuner("init", "--out", "away.yaml", "--host", "me@127.0.0.1:9", "--", "python3", "-m",
                 "sglang.launch_server", "--model-path", "/models/m", "--tp-size", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    said = "assumed: SGLang 0.5.9's flags as recorded from its wheel; 2 GPU(s) of unknown memory and kind"
    assert "me@127.0.0.1:9 could not be reached" in done.stderr and said in done.stderr
    text = (tmp_path / "away.yaml").read_text()
    assert said in text
    space = load_space(tmp_path / "away.yaml")
    assert "tp_size" not in space.parameters  # 2 is the only size 2 GPUs allow: kept fixed as given
    assert space.model.server.flags["--tp-size"] == 2 and "cuda_graph" in space.parameters

    other = tuner("init", "--out", "away2.yaml", "--host", "me@127.0.0.1:9", "--", "vllm", "serve", "/m",
                  cwd=tmp_path)
    assert other.returncode == 1 and "the vllm flags cannot be read" in other.stderr
    assert not (tmp_path / "away2.yaml").exists()
