"""The client's capacity through the tuner's own SSH forward against the same client direct.

A remote server binds the host's 127.0.0.1 and the tuner's client reaches it through
:class:`tuner.host._forward.LocalForward` over the SSH connection it holds. This script measures
what that path carries: a real ``sshd`` on 127.0.0.1 (``tests/support/sshd.py``), the sink of
:mod:`tuner.loadgen._sink` (one SSE event a token, each in its own write, as fast as it can)
started on the "host" through the tuner's own host layer, and the client
(:func:`tuner.loadgen.client_capacity`, the same ``run_level`` a study runs) at ``--concurrency``
streams:

- through the SSH forward (``SshHost``, ``forward: true``);
- direct (``LocalHost``: the same sink on this machine's loopback).

Alternating, ``--rounds`` times, in one run; it prints both, the ratio forward/direct, and the
client's own verdict on each (``measurement_bound``: the client measured itself).

Run: ``python bench/client_forward.py [--concurrency 1024] [--output-len 64] [--requests 2048]``
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.sshd import SSHD_BINARY, SshServer  # noqa: E402
from tuner.host import HostSpec, LocalHost, open_host  # noqa: E402
from tuner.loadgen import ClientCapacity, client_capacity  # noqa: E402


def _one(host, root: str, options: argparse.Namespace) -> ClientCapacity:  # noqa: ANN001
    return client_capacity(host, root, sys.executable, [options.concurrency], options.output_len,
                           workers=options.workers, requests=options.requests, scale_up=False)[0]


def _verdict(capacity: ClientCapacity) -> str:
    return "client-bound" if capacity.bound else "kept up"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=1024)
    parser.add_argument("--output-len", type=int, default=64)
    parser.add_argument("--requests", type=int, default=2048, help="per measurement")
    parser.add_argument("--workers", type=int, default=1, help="client processes")
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args(argv)
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)  # the sink's first probes, refused
    if not os.access(SSHD_BINARY, os.X_OK):
        parser.error(f"{SSHD_BINARY} is missing (apt-get install -y openssh-server)")
    with tempfile.TemporaryDirectory(prefix="client-forward-") as folder:
        base = Path(folder)
        with SshServer(base / "sshd") as sshd:
            remote = open_host(HostSpec(address=sshd.host, port=sshd.port, user=sshd.user,
                                        key_path=sshd.key_path, known_hosts=sshd.known_hosts_path,
                                        run_root=str(base / "remote"), python=sys.executable,
                                        forward=True))
            local = LocalHost(str(base / "local"))
            try:
                remote_root, local_root = remote.secure_run_root(), local.secure_run_root()
                forward, direct = [], []
                for k in range(options.rounds):
                    forward.append(_one(remote, remote_root, options))
                    direct.append(_one(local, local_root, options))
                    print(f"round {k + 1}: through the SSH forward {forward[-1].tokens_per_s:,.0f} "
                          f"output tok/s ({_verdict(forward[-1])}), direct "
                          f"{direct[-1].tokens_per_s:,.0f} ({_verdict(direct[-1])})", flush=True)
            finally:
                remote.close()
    best_forward = max(c.tokens_per_s for c in forward)
    best_direct = max(c.tokens_per_s for c in direct)
    ratio = statistics.median(f.tokens_per_s / d.tokens_per_s for f, d in zip(forward, direct))
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"machine: {os.cpu_count()} cores, load average {load} at the end, Python "
          f"{platform.python_version()}; sink: one event a token, one event a write")
    print(f"workload: {options.concurrency} streams, {options.requests} requests of "
          f"{options.output_len} output tokens a measurement, {options.workers} client process(es)")
    print(f"through the SSH forward: {best_forward:,.0f} output tok/s (best of {options.rounds})")
    print(f"direct:                  {best_direct:,.0f} output tok/s (best of {options.rounds})")
    print(f"ratio forward/direct: {ratio:.2f} (median of rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
