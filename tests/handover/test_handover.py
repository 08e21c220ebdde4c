"""A clean handover between trials, on the emulated host, locally and over the real sshd.

The emulator's tensor-parallel worker (``TUNER_EMULATOR_WORKER_LINGER_S``) outlives the stop of
its server holding the server's GPU memory, listed by ``nvidia-smi``: the next start waits for
it and then starts cleanly. One that never ends (an orphan of a killed run) makes the next start
``host-error`` after the time limit, and a start that fails out of memory while it holds memory is
``host-error`` too, never ``oom-at-start``. Only the GPUs the server uses are watched: another
user's job on another GPU (``python -m tuner.emulator.foreign_process``, on an emulated host of
16 GPUs) delays no start, and a job that was there at preflight, on the server's own GPUs, is
the host as measured: the start that then runs out of memory is ``oom-at-start``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.emulator import BASE_ARGV
from tests.support.host import group_members, wait_until
from tests.support.sshd import free_port
from tuner.emulator import prepare_host_root
from tuner.engines import load_profile
from tuner.errors import ServerFailure
from tuner.handover import GpuState, read_gpu_state, server_gpus
from tuner.host import Host
from tuner.lifecycle import ServerSession


def _session(host: Host, env: dict[str, str], name: str, *flags: str,
             **kwargs: object) -> ServerSession:
    port = free_port()
    argv = ["python3", "-m", "sglang.launch_server", *BASE_ARGV, "--host", "127.0.0.1",
            "--port", str(port), "--time-scale", "200", "--disable-cuda-graph", *flags]
    return ServerSession(host, load_profile("sglang"), argv, env, port,
                         f"{host.run_root}/{name}", stop_grace_s=5.0, **kwargs)  # type: ignore[arg-type]


def _lingering(state: GpuState | None, idle: GpuState) -> list[int]:
    assert state is not None
    known = {app.pid for app in idle.apps}
    return [app.pid for app in state.apps if app.pid not in known]


@contextlib.contextmanager
def _workers_killed(env: dict[str, str]) -> Iterator[None]:
    """Kill, after the test, the workers this test's servers left (their PIDs are in the
    emulated host's GPU state, which only this test's servers write)."""
    try:
        yield
    finally:
        for path in Path(env["TUNER_EMULATOR_STATE"]).glob("emulator-*.json"):
            pid = int(path.stem.split("-")[1])
            for member in group_members(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(member, signal.SIGKILL)


@contextlib.contextmanager
def _foreign_job(env: dict[str, str], gpus: str, mib: int = 23_456) -> Iterator[int]:
    """Another user's job holding ``mib`` on each of ``gpus`` (listed by nvidia-smi) while the
    block runs; its PID. Stopped by its own process group."""
    job = subprocess.Popen(
        [sys.executable, "-m", "tuner.emulator.foreign_process", "--gpus", gpus, "--mib", str(mib)],
        env={**os.environ, **env}, start_new_session=True, stdin=subprocess.DEVNULL,
    )
    try:
        assert wait_until(lambda: any(
            path.name == f"emulator-{job.pid}.json"
            for path in Path(env["TUNER_EMULATOR_STATE"]).iterdir()), timeout=20)
        yield job.pid
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGTERM)
        job.wait(timeout=10)


@pytest.mark.parametrize("placed_by", ["--base-gpu-id", "CUDA_VISIBLE_DEVICES"])
def test_a_job_on_another_gpu_delays_no_start(host: Host, tmp_path: Path, placed_by: str) -> None:
    env = {**prepare_host_root(tmp_path / "host"), "TUNER_EMULATOR_GPUS": "16"}
    flags: tuple[str, ...] = ("--base-gpu-id", "8")
    if placed_by == "CUDA_VISIBLE_DEVICES":
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(index) for index in range(8, 16))
        flags = ()
    idle = read_gpu_state(host, env)
    assert idle is not None and len(idle.memory_mib) == 16 and idle.apps == ()
    with _foreign_job(env, "0") as job:  # after preflight, on GPU 0
        seen = read_gpu_state(host, env)
        assert seen is not None and [app.pid for app in seen.apps] == [job]
        session = _session(host, env, "trial-0", *flags, idle_gpus=idle, handover_timeout_s=5.0)
        assert server_gpus(idle, session.argv) == frozenset(range(8, 16))
        with session:
            session.wait_ready(60)
            serving = read_gpu_state(host, env)
        assert session.handover_wait_s == 0.0 and session.failure() is None
    assert serving is not None
    server = next(app for app in serving.apps if app.pid != job)
    assert {index for index, _ in server.on} == set(range(8, 16))  # the job's GPU 0 is not its


def test_a_job_there_at_preflight_on_its_gpus_leaves_out_of_memory_the_configuration_s(
    host: Host, tmp_path: Path
) -> None:
    env = prepare_host_root(tmp_path / "host")
    with _foreign_job(env, "3", mib=23_456) as job:  # before preflight, on one of its 8 GPUs
        idle = read_gpu_state(host, env)
        assert idle is not None and [app.pid for app in idle.apps] == [job]
        session = _session(host, env, "trial-0", idle_gpus=idle, handover_timeout_s=5.0)
        with session, pytest.raises(ServerFailure) as failure:
            session.wait_ready(60)
        assert session.handover_wait_s == 0.0
    # 0.92 of the card and 23 GiB held: no room for the weights on GPU 3, and the job was there
    # when the run measured the host: the configuration's limit here, for the memory cliff.
    assert failure.value.reason == "oom-at-start", failure.value
    assert f"Process {job} has 22.91 GiB memory in use" in failure.value.excerpt


def test_the_next_start_waits_for_a_lingering_worker(host: Host, tmp_path: Path) -> None:
    env = {**prepare_host_root(tmp_path / "host"), "TUNER_EMULATOR_WORKER_LINGER_S": "12"}
    idle = read_gpu_state(host, env)
    assert idle is not None and idle.apps == () and set(idle.memory_mib.values()) == {0.0}
    with _workers_killed(env):
        first = _session(host, env, "trial-0", idle_gpus=idle)
        with first:
            first.wait_ready(60)
        after_stop = read_gpu_state(host, env)
        lingering = _lingering(after_stop, idle)
        assert len(lingering) == 1 and lingering[0] not in group_members(first.handle.pgid)
        assert after_stop.differences(idle)  # its memory, listed by nvidia-smi

        second = _session(host, env, "trial-1", idle_gpus=idle)
        with second:
            second.wait_ready(60)
        assert second.handover_wait_s >= 1.0
        assert second.failure() is None


def test_without_the_wait_the_start_fails_out_of_memory(host: Host, tmp_path: Path) -> None:
    env = {**prepare_host_root(tmp_path / "host"), "TUNER_EMULATOR_WORKER_LINGER_S": "12"}
    with _workers_killed(env):
        with _session(host, env, "trial-0") as first:
            first.wait_ready(60)
        second = _session(host, env, "trial-1")  # no idle state: nothing to wait for
        with second, pytest.raises(ServerFailure) as failure:
            second.wait_ready(60)
    assert failure.value.reason == "oom-at-start"
    assert "CUDA out of memory" in failure.value.excerpt


def test_an_orphan_holding_memory_is_host_error_never_oom_at_start(
    host: Host, tmp_path: Path
) -> None:
    env = {**prepare_host_root(tmp_path / "host"), "TUNER_EMULATOR_WORKER_LINGER_S": "3600"}
    idle = read_gpu_state(host, env)
    assert idle is not None
    with _workers_killed(env):
        with _session(host, env, "killed-run") as first:
            first.wait_ready(60)
        assert wait_until(lambda: _lingering(read_gpu_state(host, env), idle) != [], timeout=5)
        orphan = _lingering(read_gpu_state(host, env), idle)[0]

        waiting = _session(host, env, "trial-0", idle_gpus=idle, handover_timeout_s=3.0)
        with pytest.raises(ServerFailure) as failure:
            waiting.start()
        assert failure.value.reason == "host-error"
        assert f"PID {orphan} holds" in str(failure.value) and "\n" not in str(failure.value)
        assert waiting.handle is None and not host.exists(f"{host.run_root}/trial-0/server.json")

        # Measured with the orphan already there (as a run started with --skip-doctor would):
        # the start does not wait and fails out of memory; the orphan is part of the host as
        # measured, so the failure is this configuration's on this host (the memory cliff).
        seen = read_gpu_state(host, env)
        assert seen is not None
        started = _session(host, env, "trial-1", idle_gpus=seen)
        with started, pytest.raises(ServerFailure) as failure:
            started.wait_ready(60)
        assert started.handover_wait_s == 0.0
        assert failure.value.reason == "oom-at-start", failure.value
        assert "CUDA out of memory" in failure.value.excerpt
