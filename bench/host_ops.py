"""How long the host layer's steps take, locally and over a real sshd on 127.0.0.1.

For each transport it times: a command (``run``), a liveness check (``is_running``), a log read
(``read_log``), starting a detached server and stopping it (SIGTERM, port freed), and the
per-level GPU sampler's overhead (start + stop of one ``nvidia-smi -lms`` with the test stand-in).
Over SSH one connection is reused; a command's time includes the remote login shell's start
(a heavy ``~/.bashrc`` shows here), while liveness and log reads go through SFTP.

Run: ``python bench/host_ops.py [--repeats 10]`` (needs ``/usr/sbin/sshd``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.sshd import SshServer, free_port  # noqa: E402
from tuner.host import Host, HostSpec, open_host  # noqa: E402
from tuner.telemetry import GpuSampler  # noqa: E402

FAKE_BIN = Path(__file__).resolve().parents[1] / "tests" / "host" / "bin"


def _median_ms(action: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def measure(host: Host, repeats: int) -> dict[str, float]:
    """Median milliseconds of each step on ``host``."""
    port = free_port()
    argv = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port)]
    results = {"run('true')": _median_ms(lambda: host.run("true"), repeats)}
    handle = host.start_server(argv, env={}, run_dir=f"{host.run_root}/bench-0")
    try:
        results["is_running"] = _median_ms(lambda: host.is_running(handle), repeats)
        results["read_log"] = _median_ms(lambda: host.read_log(handle, 0), repeats)
    finally:
        host.stop_server(handle, grace_s=5, wait_gpu_s=0)
    cycles = []
    for number in range(max(1, repeats // 3)):
        started = time.perf_counter()
        handle = host.start_server(argv, env={}, run_dir=f"{host.run_root}/bench-{number + 1}")
        while host.port_free(port):
            time.sleep(0.01)
        host.stop_server(handle, grace_s=5, wait_gpu_s=0)
        cycles.append(time.perf_counter() - started)
    results["start+listen+stop"] = statistics.median(cycles) * 1000
    env = {"PATH": f"{FAKE_BIN}:{os.environ['PATH']}"}

    def sample() -> None:
        with GpuSampler(host, interval_ms=250, env=env):
            pass

    results["GpuSampler overhead"] = _median_ms(sample, max(1, repeats // 3))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=10)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, SshServer(Path(scratch) / "sshd") as sshd:
        specs = {
            "local": HostSpec(run_root=f"{scratch}/local"),
            "ssh": HostSpec(
                address=sshd.host,
                port=sshd.port,
                user=sshd.user,
                key_path=sshd.key_path,
                known_hosts=sshd.known_hosts_path,
                run_root=f"{scratch}/ssh",
            ),
        }
        table = {}
        for name, spec in specs.items():
            with open_host(spec) as host:
                host.run("true")  # connect first: the handshake is timed apart
                table[name] = measure(host, options.repeats)
        print(f"{'step (median ms)':<24}{'local':>10}{'ssh':>10}")
        for step in table["local"]:
            print(f"{step:<24}{table['local'][step]:>10.1f}{table['ssh'][step]:>10.1f}")
        print(f"load average: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
