"""The host layer against the emulated GLM-5 host: its sglang, its nvidia-smi, the shipped patches.

The emulator's host root (``tuner.emulator.host_root``) gives a stand-in ``sglang`` 0.5.9 package
and a stand-in ``nvidia-smi`` through the environment; the patches are the two that ship in
``search_spaces/glm5.yaml``; the server is the emulated SGLang started as on a real host
(``python3 -m sglang.launch_server``). Each test runs locally and over the real sshd.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.host import group_members, wait_until
from tests.support.sshd import free_port
from tuner import doctor
from tuner.emulator import host_root
from tuner.host import Host, ServerHandle
from tuner.patches import PatchManager
from tuner.space import load_space
from tuner.telemetry import GpuSampler, parse_gpu_csv, under_utilised

REPO = Path(__file__).resolve().parents[2]
SPACE_FILE = REPO / "search_spaces" / "glm5.yaml"
VERSION_CODE = "import sglang; print(sglang.__version__)"
HELP = "python3 -m sglang.launch_server --help"


@pytest.fixture
def emulated(tmp_path: Path) -> dict[str, str]:
    """The environment of a fresh emulated host under ``tmp_path``."""
    return host_root.prepare_host_root(tmp_path / "host")


@pytest.fixture
def space() -> Any:
    """The shipped GLM-5 search space (its flags and its two patches)."""
    return load_space(SPACE_FILE)


def test_doctor_passes_on_the_emulated_host(
    host: Host, emulated: dict[str, str], space: Any
) -> None:
    manager = PatchManager(
        host, python="python3", env=emulated, journal_dir=f"{host.run_root}/patch-journal"
    )
    checks = [
        doctor.check_python(host, "python3", emulated),
        doctor.check_engine_version(host, "python3", emulated, VERSION_CODE, "0.5.9"),
        doctor.check_gpus(host, 8, emulated),
        doctor.check_gpus_idle(host, env=emulated),
        doctor.check_flags_known(host, HELP, emulated, space.flags(), version="0.5.9"),
        *doctor.check_patches(manager, list(space.patches.values())),
    ]
    assert [c.name for c in checks if not c.ok] == [], doctor.format_checks(checks)
    gpus = checks[2].detail
    assert gpus.startswith("8 GPU(s)") and "compute_cap 12.0" in gpus and "97887 MiB" in gpus


def test_doctor_catches_a_foreign_gpu_process_and_a_flag_of_a_later_version(
    host: Host, emulated: dict[str, str]
) -> None:
    foreign = {**emulated, "TUNER_EMULATOR_FOREIGN_GPU_PROCESS": "1"}
    busy = doctor.check_gpus_idle(host, env=foreign)
    assert not busy.ok and "PID" in busy.detail
    later = doctor.check_flags_known(
        host,
        HELP,
        emulated,
        ["--tp-size", "--attn-dp-size", "--cuda-graph-backend-decode"],
        version="0.5.9",
    )
    assert not later.ok
    assert "--attn-dp-size is unknown" in later.detail
    assert "--cuda-graph-backend-decode is unknown" in later.detail


def test_the_shipped_patches_apply_to_the_emulated_sglang_and_revert_byte_for_byte(
    host: Host, emulated: dict[str, str], space: Any
) -> None:
    manager = PatchManager(
        host,
        python="python3",
        env=emulated,
        journal_dir=f"{host.run_root}/patch-journal",
        patches=space.patches.values(),
    )
    files = {name: Path(manager.locate(patch)) for name, patch in space.patches.items()}
    assert all(str(path).startswith(emulated["PYTHONPATH"]) for path in files.values())
    before = {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in files.items()}

    manager.set_active(set(space.patches))

    sums = manager.checksums()
    for name, path in files.items():
        assert sums[name]["sha256_before"] == before[name]
        assert sums[name]["sha256_after"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert manager.status(space.patches[name]) == "applied"
    gate = files["autotune_gate"].read_text()
    assert '\n            "flashinfer_cutlass",\n' in gate

    assert sorted(manager.revert_all()) == sorted(str(p) for p in files.values())
    assert manager.checksums() == {}
    after = {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in files.items()}
    assert after == before


def test_telemetry_of_idle_emulated_cards(host: Host, emulated: dict[str, str]) -> None:
    with GpuSampler(host, interval_ms=100, env=emulated) as sampler:
        time.sleep(1.0)
    summary = sampler.summary
    assert summary is not None and summary.samples >= 8 and summary.samples % 8 == 0
    assert summary.power_limit_w == 600.0
    assert under_utilised(summary)  # idle cards draw far less than half the limit


APPS = "nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits"


def _listed_mib(apps: str, pid: int) -> float:
    """The memory ``nvidia-smi --query-compute-apps=pid,used_memory`` lists for ``pid`` on one
    GPU (0: not listed)."""
    rows = parse_gpu_csv(apps, ("pid", "used_memory"))
    listed = [float(row.values["used_memory"]) for row in rows if row.values["pid"] == str(pid)]
    return max(listed, default=0.0)


CALIBRATION_FLAGS = [
    "--model-path",
    "/models/glm5",
    "--tp-size",
    "8",
    "--quantization",
    "modelopt_fp4",
    "--trust-remote-code",
    "--mem-fraction-static",
    "0.92",
]


def test_a_serving_emulated_server_is_seen_on_the_gpus_and_released_by_stop(
    host: Host, emulated: dict[str, str], servers: list[ServerHandle]
) -> None:
    port = free_port()
    argv = [
        "python3",
        "-m",
        "sglang.launch_server",
        *CALIBRATION_FLAGS,
        "--port",
        str(port),
        "--time-scale",
        "200",
    ]
    handle = host.start_server(argv, env=emulated, run_dir=f"{host.run_root}/emulated")
    servers.append(handle)
    # listed with its memory once loaded: while it loads, its memory grows between the two
    # queries of the check (processes, then GPUs), and the growth reads as a hidden process
    loaded = lambda: _listed_mib(host.run(APPS, env=emulated).stdout, handle.pid) > 90_000  # noqa: E731
    assert wait_until(loaded, 60, 0.2)
    assert not doctor.check_gpus_idle(host, env=emulated).ok  # seen as busy by anyone else
    assert doctor.check_gpus_idle(host, own_pids=[handle.pid], env=emulated).ok
    assert wait_until(lambda: not host.port_free(port), 60, 0.2)
    with GpuSampler(host, interval_ms=100, env=emulated) as sampler:
        time.sleep(1.0)
    assert sampler.summary is not None and sampler.summary.max_memory_used_mib > 90_000
    assert under_utilised(sampler.summary)  # the seeds' 250 W of 600 W

    host.stop_server(handle, grace_s=10.0, env=emulated, wait_gpu_s=30.0)

    assert group_members(handle.pgid) == []
    assert host.port_free(port)
    assert host.run(APPS, env=emulated).stdout.strip() == ""  # its GPU memory is released
