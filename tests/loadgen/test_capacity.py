"""The client's own capacity, measured before host time is spent (issue 39, 2 and 5): against a
server that streams as fast as it can on the host's loopback, on this machine and through the
tuner's own SSH forward to a real sshd on 127.0.0.1."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support.host import ssh_spec
from tuner.doctor import check_client_capacity
from tuner.host import open_host
from tuner.host._local import LocalHost
from tuner.loadgen import client_capacity


def test_the_client_capacity_of_a_local_host_is_measured_on_loopback(tmp_path: Path) -> None:
    host = LocalHost(str(tmp_path / "runs"))
    found = client_capacity(host, str(tmp_path / "runs"), sys.executable, [4, 32], 16, requests=128)
    assert [c.concurrency for c in found[:2]] == [4, 32]
    for capacity in found:
        assert capacity.via == "loopback" and capacity.output_len == 16
        assert capacity.tokens_per_s > 100  # output tokens the client took in, a second
        assert capacity.in_flight is not None and 0 < capacity.in_flight <= capacity.concurrency
    assert all(host.port_free(p) for p in range(29170, 29175))  # the sink was stopped


@pytest.mark.sshd
def test_doctor_reports_the_capacity_through_the_ssh_forward(tmp_path: Path, sshd) -> None:
    host = open_host(ssh_spec(sshd, str(tmp_path / "runs"), forward=True))
    try:
        root = host.secure_run_root()
        check = check_client_capacity(host, root, sys.executable, [8, 64], 16)
        assert check.ok, check.detail
        assert check.detail.startswith("through the SSH forward, output_len 16: c=64: ")
        assert "Levels 8, 64 are measured as long as" in check.detail
        assert "counted as a lower bound" in check.detail
        assert host._forwards  # the client went through the tuner's own LocalForward
    finally:
        host.close()
