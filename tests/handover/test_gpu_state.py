"""The GPUs' state as the handover reads it (memory per GPU, compute processes, their GPUs and
process groups, the server's CUDA_VISIBLE_DEVICES), from the host tests' stand-in nvidia-smi,
locally and over sshd; which GPUs a server uses (pure)."""

from __future__ import annotations

import os

import pytest

from tests.support.host import FAKE_BIN
from tuner.errors import HostError
from tuner.handover import GpuApp, GpuState, read_gpu_state, server_gpus, wait_until_idle
from tuner.host import Host

SMI = {"PATH": f"{FAKE_BIN}:{os.environ['PATH']}"}


def test_state_of_idle_gpus_and_of_a_foreign_process(host: Host) -> None:
    idle = read_gpu_state(host, SMI)
    assert idle is not None
    assert idle.memory_mib == {0: 4.0, 1: 4.0} and idle.apps == ()
    busy = read_gpu_state(host, {**SMI, "FAKE_SMI_FOREIGN": "1"})
    assert busy is not None
    assert [(app.pid, app.memory_mib, app.gpus) for app in busy.apps] == [(4242, 81234.0, 1)]
    assert busy.differences(idle) == [
        "PID 4242 holds 81234 MiB on 1 GPU(s)",
        "GPU 0: 81238 MiB in use (4 at preflight)",
    ]
    assert busy.differences(busy) == []  # there at preflight: nothing to wait for
    hidden = read_gpu_state(host, {**SMI, "FAKE_SMI_HIDDEN_MIB": "3000"})
    assert hidden is not None and hidden.differences(idle) == ["GPU 1: 3004 MiB in use (4 at preflight)"]
    assert read_gpu_state(host, {**SMI, "FAKE_SMI_HIDDEN_MIB": "900"}).differences(idle) == []


def test_the_wait_has_a_time_limit_and_names_what_holds_the_gpus(host: Host) -> None:
    idle = read_gpu_state(host, SMI)
    assert idle is not None
    assert wait_until_idle(host, idle, SMI, timeout_s=5) == 0.0
    with pytest.raises(HostError) as error:
        wait_until_idle(host, idle, {**SMI, "FAKE_SMI_FOREIGN": "1"}, timeout_s=1.0, poll_s=0.2)
    message = str(error.value)
    assert "not back to their idle state 1 s after the previous server" in message
    assert "PID 4242 holds 81234 MiB" in message and "\n" not in message


def test_a_host_without_nvidia_smi_has_no_gpu_state(host: Host) -> None:
    assert read_gpu_state(host, {"PATH": "/usr/bin:/bin"}) is None


def test_only_the_gpus_the_server_uses_are_waited_for(host: Host) -> None:
    """The foreign process is on GPU 0: a server on GPU 1 (by CUDA_VISIBLE_DEVICES, read on the
    host in the server's environment, or by its device flags) does not wait for it."""
    on_gpu_1 = {**SMI, "CUDA_VISIBLE_DEVICES": "1"}
    idle = read_gpu_state(host, on_gpu_1)
    assert idle is not None and idle.visible_devices == "1"
    assert idle.uuids == {0: "GPU-fake-0", 1: "GPU-fake-1"}
    busy = {**on_gpu_1, "FAKE_SMI_FOREIGN": "1"}
    assert wait_until_idle(host, idle, busy, argv=["--tp-size", "1"], timeout_s=1.0) == 0.0
    flagged = read_gpu_state(host, SMI)
    assert flagged is not None and flagged.visible_devices is None
    both = {**SMI, "FAKE_SMI_FOREIGN": "1"}
    assert wait_until_idle(host, flagged, both, argv=["--base-gpu-id", "1"], timeout_s=1.0) == 0.0
    with pytest.raises(HostError, match="PID 4242 holds 81234 MiB"):  # on GPU 0: its GPU
        wait_until_idle(host, flagged, both, argv=["--tp-size", "2"], timeout_s=1.0, poll_s=0.2)


def _state(visible: str | None, count: int = 8) -> GpuState:
    return GpuState({index: 0.0 for index in range(count)}, (),
                    {index: f"GPU-{index:x}7e3a-5c1d" for index in range(count)}, visible)


@pytest.mark.parametrize(("visible", "argv", "expected"), [
    (None, [], {0}),  # SGLang's and vLLM's default: one GPU, the first
    (None, ["--tp-size", "8"], set(range(8))),
    (None, ["--tp-size=4", "--base-gpu-id=4"], {4, 5, 6, 7}),
    (None, ["--tp-size", "2", "--base-gpu-id", "1", "--gpu-id-step", "2"], {1, 3}),
    (None, ["-tp", "2", "-pp", "2"], {0, 1, 2, 3}),  # vLLM's short flags
    (None, ["--tensor-parallel-size", "2", "--data-parallel-size", "2"], {0, 1, 2, 3}),
    (None, ["--tp-size", "4", "--dp-size", "2", "--enable-dp-attention"], {0, 1, 2, 3}),
    (None, ["--tp-size", "16", "--nnodes", "2"], set(range(8))),
    ("6,7", ["--tp-size", "2"], {6, 7}),
    ("4,5,6,7", ["--tp-size", "2", "--base-gpu-id", "2"], {6, 7}),
    ("GPU-57e3a,GPU-67e3a-5c1d", ["--tp-size", "2"], {5, 6}),  # UUIDs and their prefixes
    ("3,MIG-1,4", ["--tp-size", "1"], {3}),  # CUDA stops reading at an entry it cannot use
])
def test_the_gpus_a_server_uses(visible: str | None, argv: list[str], expected: set[int]) -> None:
    assert server_gpus(_state(visible), ["python3", "-m", "sglang.launch_server", *argv]) == expected


@pytest.mark.parametrize(("visible", "argv"), [
    (None, ["--tp-size", "16"]),  # more GPUs than the host has: watch every GPU
    ("6,7", ["--tp-size", "4"]),
    ("3,MIG-1,4", ["--tp-size", "2"]),
    ("GPU-7e3a", []),  # a prefix of several UUIDs
    (None, ["--tp-size", "$TP"]),  # not a number: cannot tell
])
def test_the_gpus_of_a_server_that_cannot_be_told_are_all_watched(
    visible: str | None, argv: list[str]
) -> None:
    assert server_gpus(_state(visible), argv) is None
    assert server_gpus(None, ["--tp-size", "8"]) is None


def test_a_process_there_at_preflight_counts_only_when_it_grows() -> None:
    def app(mib: float, index: int = 0) -> GpuApp:
        return GpuApp(4242, mib, 4242, 1, ((index, mib),))

    idle = GpuState({0: 5000.0, 1: 0.0}, (app(5000.0),))
    same = GpuState({0: 5500.0, 1: 0.0}, (app(5500.0),))
    grown = GpuState({0: 9000.0, 1: 0.0}, (app(9000.0),))
    assert same.differences(idle) == []
    assert grown.differences(idle) == ["PID 4242 holds 9000 MiB on 1 GPU(s)",
                                       "GPU 0: 9000 MiB in use (5000 at preflight)"]
    assert grown.on_gpus(frozenset({1})).differences(idle.on_gpus(frozenset({1}))) == []
