"""The emulated host's folder: stand-in sglang on PYTHONPATH only, nvidia-smi and python3 on
PATH, patches surviving a second preparation, and the emulator reading both patched files."""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

from tests.support.emulator import (BASE_ARGV, Emulator, force_allreduce, get_json,
                                    patch_gate)
from tuner.emulator import prepare_host_root

LOCATE = "import sglang, os; print(os.path.dirname(sglang.__file__)); print(sglang.__version__)"


def on_host(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    """Run a command as the emulated host would (its PATH, PYTHONPATH and state folder)."""
    return subprocess.run(list(argv), env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL, check=False)


def test_layout_and_environment(tmp_path: Path) -> None:
    env = prepare_host_root(tmp_path / "host")
    root = (tmp_path / "host").resolve()
    assert env["PYTHONPATH"] == str(root / "site")
    assert env["PATH"].split(":")[0] == str(root / "bin")
    assert env["TUNER_EMULATOR_STATE"] == str(root / "state") and (root / "state").is_dir()
    for tool in ("nvidia-smi", "python3", "python"):
        assert os.access(root / "bin" / tool, os.X_OK), tool
    files = {p.relative_to(root / "site").as_posix() for p in (root / "site").rglob("*.py")}
    assert {"sglang/__init__.py", "sglang/launch_server.py",
            "sglang/srt/model_executor/model_runner.py",
            "sglang/srt/layers/communicator.py"} <= files


def test_the_patch_step_finds_sglang_by_asking_the_hosts_python(tmp_path: Path) -> None:
    env = prepare_host_root(tmp_path / "host")
    found = on_host(env, "python3", "-c", LOCATE)
    assert found.returncode == 0, found.stderr
    where, version = found.stdout.split()
    assert where == str((tmp_path / "host/site/sglang").resolve()) and version == "0.5.9"
    if importlib.util.find_spec("sglang") is None:  # the stand-in never shadows anything here
        assert on_host({}, "python3", "-c", "import sglang").returncode != 0


def test_the_hosts_sglang_launcher_is_the_emulator(tmp_path: Path) -> None:
    env = prepare_host_root(tmp_path / "host")
    shown = on_host(env, "python3", "-m", "sglang.launch_server", "--help")
    assert shown.returncode == 0 and "--enable-flashinfer-allreduce-fusion" in shown.stdout
    assert "EMULATED" in shown.stdout


def test_a_patched_file_survives_preparing_the_host_again(tmp_path: Path) -> None:
    env = prepare_host_root(tmp_path / "host")
    patch_gate(tmp_path / "host/site")
    gate = tmp_path / "host/site/sglang/srt/model_executor/model_runner.py"
    patched = gate.read_text()
    assert prepare_host_root(tmp_path / "host") == env
    assert gate.read_text() == patched and '\n            "flashinfer_cutlass",\n' in patched


def test_the_emulator_reads_both_patched_files_at_start(tmp_path: Path) -> None:
    env = prepare_host_root(tmp_path / "host")
    with Emulator(BASE_ARGV, tmp_path, env=env) as plain:
        assert plain.wait_ready(30), plain.log()
        before = get_json(f"{plain.base_url}/server_info")[1]["emulator"]
    patch_gate(tmp_path / "host/site")
    force_allreduce(tmp_path / "host/site")
    with Emulator(BASE_ARGV, tmp_path, env=env) as patched:
        assert patched.wait_ready(30), patched.log()
        after = get_json(f"{patched.base_url}/server_info")[1]["emulator"]
    assert (before["patched_gate"], before["forced_allreduce"]) == (False, False)
    assert (after["patched_gate"], after["forced_allreduce"]) == (True, True)
    assert after["sglang_package"] == str((tmp_path / "host/site/sglang").resolve())
