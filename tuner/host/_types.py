"""The values the host layer takes and returns: where the host is, a command's result, a server.

All three are frozen: a :class:`ServerHandle` is a record of a process that was started (its PID,
process group, start time and run folder), never a live object, so it can be stored, compared and
rebuilt from the ``server.json`` a run folder holds.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from tuner.host._run_root import DEFAULT_RUN_ROOT

__all__ = ["CommandResult", "HostSpec", "LogChunk", "ServerHandle"]


@dataclass(frozen=True)
class HostSpec:
    """Where the GPU host is and how to reach it (built from the YAML ``host:`` section/--host).

    Attributes:
        address: ``"local"`` for this machine, else a hostname, an IP address or an alias of
            ``~/.ssh/config``.
        user: SSH user; None takes it from ``~/.ssh/config`` or the local user name.
        port: SSH port; None takes it from ``~/.ssh/config`` or 22.
        key_path: private key file; None lets ``~/.ssh/config`` (IdentityFile) or the agent decide.
        known_hosts: known_hosts file the host key is checked against (default
            ``~/.ssh/known_hosts``).
        accept_new_host_key: accept and record the key of a host not yet in ``known_hosts``. A
            key that differs from the recorded one is refused whatever this says.
        python: the Python interpreter on the host (patches, version checks).
        run_root: the folder on the host under which run folders (logs, PID files) live; ``~/``
            is the home of the user on the host. Per user by default, created 0700.
        connect_timeout_s: seconds to wait for the SSH handshake.
        ssh_config: the OpenSSH client configuration file to read (default ``~/.ssh/config``).
        forward: reach a server bound to the host's loopback through a port forwarded over the
            SSH connection. None (auto): yes, unless the host's address is this machine's own
            loopback (its 127.0.0.1 is ours: the client connects directly).
    """

    address: str = "local"
    user: str | None = None
    port: int | None = None
    key_path: str | None = None
    known_hosts: str | None = None
    accept_new_host_key: bool = False
    python: str = "python3"
    run_root: str = DEFAULT_RUN_ROOT
    connect_timeout_s: float = 10.0
    ssh_config: str | None = None
    forward: bool | None = None

    @property
    def is_local(self) -> bool:
        """True when the host is this machine (no SSH)."""
        return self.address == "local"


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and how it exited."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0."""
        return self.exit_code == 0

    def summary(self, limit: int = 300) -> str:
        """One line for an error message: the exit code and the end of stderr (or stdout)."""
        text = (self.stderr.strip() or self.stdout.strip()).replace("\n", " | ")
        if len(text) > limit:
            text = "..." + text[-limit:]
        return f"exit {self.exit_code}: {text}" if text else f"exit {self.exit_code}"


@dataclass(frozen=True)
class ServerHandle:
    """A detached server started on a host: enough to find, follow and stop it later.

    Attributes:
        pid: the server's PID; it leads its own session, so its process group id is the same.
        pgid: the process group every process of the server belongs to.
        starttime: the kernel's start time of ``pid`` (``/proc/PID/stat`` field 22). With
            ``boot_id`` it tells this process from a later one that reused the PID.
        boot_id: ``/proc/sys/kernel/random/boot_id`` when the server started.
        run_dir: the run folder on the host holding ``server.pid``, ``server.json`` and the log.
        log_path: the file the server's stdout and stderr go to.
        argv: the command line the server was started with.
        port: the TCP port it serves on, if known.
        started_at: Unix time of the start (the tuner machine's clock).
    """

    pid: int
    pgid: int
    starttime: str
    boot_id: str
    run_dir: str
    log_path: str
    argv: tuple[str, ...] = field(default_factory=tuple)
    port: int | None = None
    started_at: float = 0.0

    def to_json(self) -> str:
        """The ``server.json`` document of this handle."""
        record = asdict(self)
        record["argv"] = list(self.argv)
        return json.dumps(record, sort_keys=True)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ServerHandle:
        """Rebuild a handle from a parsed ``server.json`` (KeyError/ValueError if malformed)."""
        port = record.get("port")
        return cls(
            pid=int(record["pid"]),
            pgid=int(record.get("pgid", record["pid"])),
            starttime=str(record["starttime"]),
            boot_id=str(record.get("boot_id", "")),
            run_dir=str(record["run_dir"]),
            log_path=str(record["log_path"]),
            argv=tuple(str(a) for a in record.get("argv", ())),
            port=int(port) if port is not None else None,
            started_at=float(record.get("started_at", 0.0)),
        )


class LogChunk(NamedTuple):
    """Log text read from a byte offset, and the offset to read from next time."""

    text: str
    offset: int
