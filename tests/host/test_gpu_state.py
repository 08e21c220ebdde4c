"""The GPUs' state as the handover reads it (memory per GPU, compute processes and their process
groups), from the host tests' stand-in nvidia-smi, locally and over sshd."""

from __future__ import annotations

import os

import pytest

from tests.host.conftest import FAKE_BIN
from tuner.errors import HostError
from tuner.handover import read_gpu_state, wait_until_idle
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
