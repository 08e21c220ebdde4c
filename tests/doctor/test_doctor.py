"""Preflight checks against real hosts, a stand-in engine's --help and a stand-in nvidia-smi."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from tests.support.host import FAKE_BIN, PYTHON, ssh_spec
from tests.support.patches import GATE, GATE_0_5_9, GATE_0_5_13
from tests.support.sshd import SshServer, free_port
from tuner import doctor
from tuner.host import Host, open_host
from tuner.patches import PatchManager

# argparse help of a stand-in launch_server with a few 0.5.21-style names.
LAUNCH_SERVER = """\
import argparse
parser = argparse.ArgumentParser(prog="launch_server")
for flag in ["--model-path", "--tp-size", "--moe-runner-backend", "--attention-backend",
             "--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill", "--port"]:
    parser.add_argument(flag)
parser.add_argument("--disable-cuda-graph", action="store_true")
parser.parse_args()
"""


@pytest.fixture
def smi_env() -> dict[str, str]:
    return {"PATH": f"{FAKE_BIN}:{os.environ['PATH']}"}


@pytest.fixture
def help_command(tmp_path: Path) -> str:
    script = tmp_path / "launch_server.py"
    script.write_text(LAUNCH_SERVER)
    return f"{PYTHON} {script} --help"


def test_a_flag_the_installed_version_lacks_is_caught(host: Host, help_command: str) -> None:
    check = doctor.check_flags_known(
        host,
        help_command,
        {},
        [
            "--tp-size",
            "--moe-runner-backend=flashinfer_cutlass",
            "--disable-cuda-graph",
            "--enable-dp-attention",
        ],
        version="0.5.21",
    )
    assert not check.ok
    assert "--enable-dp-attention is unknown" in check.detail and "0.5.21" in check.detail
    assert "0.5.21" in check.fix
    assert doctor.check_flags_known(
        host, help_command, {}, ["--tp-size", "--disable-cuda-graph"]
    ).ok


def test_prefixes_are_judged_as_argparse_judges_them(host: Host, help_command: str) -> None:
    assert doctor.check_flags_known(host, help_command, {}, ["--moe-runner"]).ok  # unique prefix
    ambiguous = doctor.check_flags_known(host, help_command, {}, ["--cuda-graph-max-bs"])
    assert not ambiguous.ok and "ambiguous" in ambiguous.detail


def test_a_gpu_busy_with_a_foreign_process_is_caught(host: Host, smi_env: dict[str, str]) -> None:
    assert doctor.check_gpus_idle(host, env=smi_env).ok
    busy = doctor.check_gpus_idle(host, env={**smi_env, "FAKE_SMI_FOREIGN": "1"})
    assert not busy.ok and "never stops them" in busy.fix
    assert "PID 4242 /usr/bin/python3 on 1 GPU(s), 81234 MiB" in busy.detail
    assert doctor.check_gpus_idle(
        host, own_pids=[4242], env={**smi_env, "FAKE_SMI_FOREIGN": "1"}
    ).ok
    hidden = doctor.check_gpus_idle(host, env={**smi_env, "FAKE_SMI_HIDDEN_MIB": "5000"})
    assert not hidden.ok and "GPU 1: 5004 MiB held by processes not listed here" in hidden.detail


def test_gpus_idle_looks_only_at_the_gpus_the_server_uses(host: Host, smi_env: dict[str, str]) -> None:
    foreign = {**smi_env, "FAKE_SMI_FOREIGN": "1", "FAKE_SMI_HIDDEN_MIB": "5000"}  # GPU 0; GPU 1
    on_gpu_1 = doctor.check_gpus_idle(host, env=foreign, server_gpus=frozenset({1}))
    assert not on_gpu_1.ok and "GPU 1: 5004 MiB" in on_gpu_1.detail and "PID 4242" not in on_gpu_1.detail
    elsewhere = doctor.check_gpus_idle(host, env={**smi_env, "FAKE_SMI_FOREIGN": "1"}, server_gpus=frozenset({1}))
    assert elsewhere.ok and elsewhere.detail == "no other process on the 1 GPU(s) the server uses"
    assert not doctor.check_gpus_idle(host, env={**smi_env, "FAKE_SMI_FOREIGN": "1"}, server_gpus=frozenset({0})).ok


def test_gpus_are_listed_with_memory_and_compute_capability(
    host: Host, smi_env: dict[str, str]
) -> None:
    check = doctor.check_gpus(host, 2, smi_env)
    assert check.ok
    assert check.detail.startswith("2 GPU(s): NVIDIA RTX PRO 6000 Blackwell")
    assert "97887 MiB" in check.detail and "compute_cap 12.0" in check.detail
    assert not doctor.check_gpus(host, 8, smi_env).ok
    no_smi = {"PATH": "/usr/bin:/bin"}
    assert doctor.check_gpus(host, None, no_smi).ok  # a CPU host
    assert not doctor.check_gpus(host, 1, no_smi).ok


def test_a_port_in_use_is_caught(host: Host) -> None:
    port = free_port()
    assert doctor.check_port_free(host, port).ok
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", port))
        listener.listen()
        check = doctor.check_port_free(host, port)
    assert not check.ok and f"port {port} is in use" in check.detail


def test_python_engine_version_and_disk(host: Host, tmp_path: Path) -> None:
    site = tmp_path / "site" / "sglang"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text('__version__ = "0.5.9"\n')
    env = {"PYTHONPATH": str(site.parent)}
    code = "import sglang; print(sglang.__version__)"
    assert doctor.check_python(host, PYTHON, env).ok
    assert not doctor.check_python(host, "/no/such/python3", env).ok
    assert doctor.check_engine_version(host, PYTHON, env, code, "0.5.9").ok
    assert doctor.check_engine_version(host, PYTHON, env, code, "0.5").ok
    wrong = doctor.check_engine_version(host, PYTHON, env, code, "0.5.13")
    assert not wrong.ok and "installed 0.5.9" in wrong.detail
    assert not doctor.check_engine_version(host, PYTHON, {}, code, None).ok  # not installed
    assert doctor.check_disk(host, str(tmp_path / "not" / "yet" / "made")).ok
    assert not doctor.check_disk(host, str(tmp_path), min_free_gb=10**9).ok


def test_patches_that_do_not_apply_are_caught_before_any_trial(host: Host, tmp_path: Path) -> None:
    source = tmp_path / "site" / "sglang" / "srt" / "model_executor" / "model_runner.py"
    source.parent.mkdir(parents=True)
    (tmp_path / "site" / "sglang" / "__init__.py").write_text("")
    manager = PatchManager(
        host,
        python=PYTHON,
        env={"PYTHONPATH": str(tmp_path / "site")},
        journal_dir=str(tmp_path / "journal"),
    )
    source.write_text(GATE_0_5_9)
    assert [c.ok for c in doctor.check_patches(manager, [GATE])] == [True]
    source.write_text(GATE_0_5_13)
    [check] = doctor.check_patches(manager, [GATE])
    assert not check.ok and "drop or pin the dimension" in check.detail + check.fix
    source.write_text(GATE_0_5_9.replace(GATE.find, GATE.replace))
    [check] = doctor.check_patches(manager, [GATE])
    assert not check.ok and "already holds the replacement" in check.detail


def test_an_unreachable_host_fails_the_first_check(sshd: SshServer, tmp_path: Path) -> None:
    with open_host(ssh_spec(sshd, str(tmp_path), port=free_port())) as host:
        check = doctor.check_reachable(host)
    assert not check.ok and "cannot connect" in check.detail and "host.address" in check.fix
    with open_host(ssh_spec(sshd, str(tmp_path))) as host:
        assert doctor.check_reachable(host).ok


def test_format_shows_pass_fail_and_fix() -> None:
    text = doctor.format_checks(
        [
            doctor.Check("port free", True, "port 30000 is free"),
            doctor.Check("gpus idle", False, "busy: PID 4242 [python3]", "wait until they end"),
        ]
    )
    lines = text.splitlines()
    assert lines[0] == "[green]PASS[/green] port free: port 30000 is free"
    assert lines[1].startswith("[red]FAIL[/red] gpus idle: busy: PID 4242 \\[python3]")
    assert lines[2] == "     fix: wait until they end"
