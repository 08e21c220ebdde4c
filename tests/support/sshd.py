"""A real OpenSSH server on 127.0.0.1 for tests, with its own keys, config and known_hosts.

It follows ``../shared/reference/recipes.md``: own host and client keys, ``StrictModes no``,
``UsePAM no``, ``/run/sshd`` created, a free port. ``sshd -D`` runs in the foreground as our own
child, so it is stopped by its PID and nothing else is ever signalled.
"""

from __future__ import annotations

import getpass
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Self

__all__ = ["SSHD_BINARY", "SshServer", "free_port"]

SSHD_BINARY = "/usr/sbin/sshd"

_CONFIG = """\
Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {directory}/sshd.pid
AuthorizedKeysFile {directory}/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
PrintMotd no
UseDNS no
MaxSessions 50
MaxStartups 50:30:100
LogLevel VERBOSE
Subsystem sftp internal-sftp
"""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _keygen(path: Path) -> None:
    path.unlink(missing_ok=True)
    Path(f"{path}.pub").unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tuner-test", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )


class SshServer:
    """One ``sshd`` on 127.0.0.1:``port`` that accepts ``user`` with ``key_path``.

    Attributes:
        host: always ``127.0.0.1``.
        port: the port it listens on.
        user: the local user the tests log in as.
        key_path: the client's private key.
        known_hosts_path: a known_hosts file holding this server's current host key.
        host_key_path: the server's private host key.
    """

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.directory = directory
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.user = getpass.getuser()
        self.key_path = str(directory / "client_ed25519")
        self.host_key_path = str(directory / "host_ed25519")
        self.known_hosts_path = str(directory / "known_hosts")
        self.log_path = str(directory / "sshd.log")
        self._process: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)
        _keygen(Path(self.host_key_path))
        _keygen(Path(self.key_path))
        Path(directory / "authorized_keys").write_text(Path(f"{self.key_path}.pub").read_text())
        self._write_config()

    def _write_config(self) -> None:
        text = _CONFIG.format(
            port=self.port, host_key=self.host_key_path, directory=self.directory
        )
        (self.directory / "sshd_config").write_text(text)
        public = Path(f"{self.host_key_path}.pub").read_text().split()
        Path(self.known_hosts_path).write_text(
            f"[{self.host}]:{self.port} {public[0]} {public[1]}\n"
        )

    @property
    def pid(self) -> int | None:
        """The listening sshd's PID while it runs."""
        return self._process.pid if self._process and self._process.poll() is None else None

    def start(self, timeout: float = 10.0) -> None:
        """Start sshd and wait until it accepts TCP connections."""
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        self._process = subprocess.Popen(
            [SSHD_BINARY, "-D", "-f", str(self.directory / "sshd_config"), "-E", self.log_path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                error = self._process.stderr.read().decode() if self._process.stderr else ""
                log = Path(self.log_path).read_text() if Path(self.log_path).exists() else ""
                raise RuntimeError(f"sshd exited at start: {error} {log[-500:]}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"sshd did not listen on {self.host}:{self.port} within {timeout} s")

    def session_pids(self) -> list[int]:
        """PIDs of the sshd processes serving connections (children of the listener)."""
        listener = self.pid
        if listener is None:
            return []
        children = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[1] == str(listener):
                children.append(int(stat.parent.name))
        return children

    def drop_connections(self) -> int:
        """Kill, by PID, every sshd process serving a connection; returns how many."""
        pids = self.session_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def stop(self) -> None:
        """Stop the listener and its sessions (by PID); idempotent."""
        self.drop_connections()
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        if process.stderr:
            process.stderr.close()

    def restart(self, *, new_host_key: bool = False) -> None:
        """Stop and start again on the same port; ``new_host_key`` first regenerates the host key
        (the known_hosts file is left as it was, holding the old key)."""
        self.stop()
        if new_host_key:
            _keygen(Path(self.host_key_path))
        self.start()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
