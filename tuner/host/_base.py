"""The :class:`Host` interface and the server lifecycle shared by every transport.

A transport (local subprocess, SSH) supplies only the primitives: run a shell command, read and
write files, fetch a file, reconnect, close. Everything about servers (start detached, follow the
log, is it alive, stop it, orphans, old run folders) is written once here, so the local and the
SSH host behave the same way: starting, stopping and scanning are shell scripts from
:mod:`tuner.host._shell`; liveness, ports and logs are read from ``/proc`` and the run folder
through the file primitives (SFTP over SSH: no shell start, a few milliseconds a call).
"""

from __future__ import annotations

import abc
import json
import shlex
import time
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, Self, cast

from tuner.errors import ConfigError, HostError
from tuner.host import _shell
from tuner.host._run_root import inspect_run_root
from tuner.host._owner import current_owner, owner_alive
from tuner.host._types import CommandResult, LogChunk, ServerHandle
from tuner.interrupts import interrupts_held

__all__ = ["Host", "LOOPBACK", "READ_BACK_S", "WILDCARDS"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("0.0.0.0", "::", "")

# How long an interrupted start looks for the server it may still have spawned (over SSH the
# start script goes on on the host): the ``wait_s`` of :meth:`Host.server_in` after a failed start.
READ_BACK_S = 3.0

_LOG_CHUNK = 1 << 20  # at most this many bytes of log per read_log call


class Host(abc.ABC):
    """A machine the tuner starts servers on: this one (:class:`LocalHost`) or one over SSH.

    Attributes:
        name: ``"local"`` or ``"user@host:port"``, for messages.
        address: the address a client on the tuner's machine uses to reach servers on the host.
        run_root: the folder on the host under which run folders live.
        connections: how many connections were opened so far (0 locally); a change during a
            trial means the connection dropped and was re-established meanwhile.
    """

    name: str
    address: str
    run_root: str
    connections: int = 0

    # -- transport primitives -------------------------------------------------------------------

    @abc.abstractmethod
    def run(
        self, command: str, *, timeout: float = 60.0, env: Mapping[str, str] | None = None
    ) -> CommandResult:
        """Run ``command`` with ``sh`` on the host and wait for it.

        Args:
            command: a shell command line (the caller quotes its values).
            timeout: seconds before the command is abandoned (:class:`HostError`).
            env: variables exported before the command.

        Raises:
            HostError: the host cannot be reached, or the command timed out.
        """

    @abc.abstractmethod
    def read_file(self, path: str) -> bytes:
        """The bytes of a file on the host (:class:`HostError` if it cannot be read)."""

    @abc.abstractmethod
    def write_file(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        """Replace a file on the host atomically: written to a new file beside it, created with
        ``mode`` (default 0600, private from the moment it exists), then given the old file's
        mode when there was one and no ``mode`` is asked, and moved over it. Missing parents are
        created 0700."""

    @abc.abstractmethod
    def fetch(self, remote_path: str, local_path: str) -> None:
        """Copy a file from the host to the tuner's machine (parents of ``local_path`` created)."""

    @abc.abstractmethod
    def _read_range(self, path: str, offset: int, limit: int) -> bytes:
        """Up to ``limit`` bytes of a file from byte ``offset`` (empty if the file is absent)."""

    def reconnect(self) -> None:
        """Re-establish the connection to the host (nothing to do locally)."""

    def close(self) -> None:
        """Release the connection (nothing to do locally)."""

    def abandon(self) -> None:
        """Cut short the command in flight (from a signal handler): nothing to do locally, where
        the command itself is interrupted; SSH closes its connection."""

    def sibling(self) -> Host:
        """Another handle on the same host with a connection of its own, for a background thread
        whose errors must not reach the run's connection (locally: this host itself)."""
        return self

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- shared lifecycle -----------------------------------------------------------------------

    def _checked(self, command: str, what: str, *, timeout: float = 60.0) -> CommandResult:
        result = self.run(command, timeout=timeout)
        if not result.ok:
            raise HostError(f"{self.name}: {what} failed ({result.summary()})")
        return result

    def client_url(self, port: int, bind: str | None) -> str:
        """The URL the tuner's client reaches a server on the host at, listening on ``bind``
        (its ``--host``) and ``port``. Locally: that address (loopback for a wildcard)."""
        address = bind if bind and bind not in WILDCARDS else self.address
        return f"http://{_url_host(address)}:{int(port)}"

    def secure_run_root(self, *, create: bool = True) -> str:
        """Make :attr:`run_root` absolute (``~/`` is the host user's home), create it 0700 if
        missing (with ``create``), and check that it is this user's own and closed to others.

        Raises:
            ConfigError: owned by another user, or writable by group or others (exit 2).
            HostError: the host cannot be reached, or the folder cannot be created.
        """
        state = inspect_run_root(self, self.run_root, create=create)
        self.run_root = state.path
        problem = state.problem()
        if problem:
            raise ConfigError(problem)
        return self.run_root

    def exists(self, path: str) -> bool:
        """True if ``path`` exists on the host."""
        return self.run(f"test -e {shlex.quote(path)}", timeout=30.0).ok

    def start_server(
        self,
        argv: list[str],
        *,
        env: Mapping[str, str],
        run_dir: str,
        log_name: str = "server.log",
        cwd: str | None = None,
        port: int | None = None,
    ) -> ServerHandle:
        """Start ``argv`` detached, in its own session and process group, logging to ``run_dir``.

        The server outlives the tuner's connection. ``run_dir`` receives ``server.pid``,
        ``server.json`` (this handle) and the log.

        Args:
            argv: the command line; every word is shell-quoted, so values reach it unchanged.
            env: variables added to the host's environment for the server.
            run_dir: the run folder on the host (created if missing).
            log_name: the log file's name inside ``run_dir``.
            cwd: working directory (default ``run_dir``).
            port: the port it will serve on (default: the value after ``--port`` in ``argv``).

        A first Ctrl-C (or SIGTERM) is held until the start command returns and then raised: the
        caller reads the handle back with :meth:`server_in` and stops the server, unless the
        clean-up is abandoned (:mod:`tuner.interrupts`).

        Raises:
            HostError: the start command failed or printed no PID.
        """
        log_path = str(PurePosixPath(run_dir) / log_name)
        port = port if port is not None else _port_from_argv(argv)
        started_at = time.time()
        tail = json.dumps(
            {
                "run_dir": run_dir,
                "log_path": log_path,
                "argv": list(argv),
                "port": port,
                "started_at": started_at,
                "env_names": sorted(env),
                "owner": current_owner(),
            },
            sort_keys=True,
        )[1:]
        script = _shell.start_script(argv, env, run_dir, log_path, cwd or run_dir, tail)
        # Ctrl-C waits for the start script: once it returns, ``server.json`` names what it spawned
        # (and the caller stops it); cut short over SSH, the script could spawn it unseen.
        with interrupts_held(f"the start of {argv[0]!r}", abandon=self.abandon):
            result = self._checked(script, f"starting {argv[0]!r} in {run_dir}")
        fields = result.stdout.split()
        if len(fields) < 2 or not fields[0].isdigit():
            raise HostError(
                f"{self.name}: starting {argv[0]!r} printed no PID ({result.summary()})"
            )
        pid = int(fields[0])
        return ServerHandle(
            pid=pid,
            pgid=pid,
            starttime=fields[1],
            boot_id=fields[2] if len(fields) > 2 else "",
            run_dir=run_dir,
            log_path=log_path,
            argv=tuple(argv),
            port=port,
            started_at=started_at,
        )

    def server_in(self, run_dir: str, *, wait_s: float = 0.0) -> ServerHandle | None:
        """The server started in ``run_dir`` if it still runs (its ``server.json`` is written
        right after the spawn), else None: how a start interrupted before it returned its handle
        is cleaned up. ``wait_s``: how long to keep looking (over SSH an interrupted start script
        goes on on the host and may spawn the server a moment later)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                record = json.loads(self.read_file(f"{run_dir}/server.json"))
                handle = ServerHandle.from_record(record)
                return handle if self.is_running(handle) else None
            except (HostError, ValueError, KeyError, TypeError):
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.2)

    def is_running(self, handle: ServerHandle) -> bool:
        """True while the server's leader process lives (a zombie counts as dead).

        Reads ``/proc`` through the file primitive (SFTP over SSH): no shell is started.
        """
        state = self._proc_state(handle.pid)
        if state is None or state[0] in ("Z", "X", "x"):
            return False
        if handle.boot_id and self._boot_id() not in ("", handle.boot_id):
            return False
        return state[1] == handle.starttime

    def _proc_state(self, pid: int) -> tuple[str, str] | None:
        """(state letter, start time) of a process, or None if it does not exist."""
        text = self._read_range(f"/proc/{int(pid)}/stat", 0, 4096).decode("utf-8", "replace")
        fields = text.rsplit(")", 1)[-1].split()
        return (fields[0], fields[19]) if len(fields) > 19 else None

    def _boot_id(self) -> str:
        return self._read_range("/proc/sys/kernel/random/boot_id", 0, 128).decode().strip()

    def read_log(self, handle: ServerHandle, offset: int) -> LogChunk:
        """The log text appended since byte ``offset``, and the offset to pass next time.

        A multi-byte character cut by the end of a read is left for the next call.
        """
        data = self._read_range(handle.log_path, offset, _LOG_CHUNK)
        cut = _complete_utf8_prefix(data)
        return LogChunk(data[:cut].decode("utf-8", errors="replace"), offset + cut)

    def stop_server(
        self,
        handle: ServerHandle,
        *,
        grace_s: float = 15.0,
        port: int | None = None,
        stop_command: str | None = None,
        wait_gpu_s: float = 60.0,
        port_wait_s: float = 30.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        """Stop the server and wait until its port and GPU memory are free. Idempotent.

        SIGTERM goes to its process group, SIGKILL after ``grace_s``. A server run by a container
        runtime is stopped with ``stop_command`` first (a signal to the group would not reach
        inside the container). ``env`` is exported first (e.g. a PATH with ``nvidia-smi``).
        Ctrl-C waits until the stop returned, unless the clean-up is abandoned
        (:mod:`tuner.interrupts`).

        Raises:
            HostError: a process of the group survived SIGKILL, the port stayed in use for
                ``port_wait_s``, or the GPUs still listed its processes after ``wait_gpu_s``.
        """
        port = port if port is not None else handle.port
        script = _shell.env_exports(env) + _shell.stop_script(
            handle.pid,
            handle.starttime,
            handle.boot_id,
            handle.run_dir,
            grace_s=grace_s,
            port=port,
            stop_command=stop_command,
            port_wait_s=port_wait_s,
            wait_gpu_s=wait_gpu_s,
        )
        budget = 2 * grace_s + 5 + port_wait_s + wait_gpu_s + 30
        # Cut short, the stop could leave the server running: Ctrl-C waits for it.
        with interrupts_held(f"the stop of server {handle.pid}", abandon=self.abandon):
            words = self._checked(
                script, f"stopping server {handle.pid}", timeout=budget
            ).stdout.split()
        problems = {
            "alive": f"processes of group {handle.pgid} survived SIGKILL",
            "port-busy": f"port {port} still in use {port_wait_s:g} s after the stop",
            "gpu-busy": f"the GPUs still list its processes {wait_gpu_s:g} s after the stop",
        }
        found = [text for word, text in problems.items() if word in words]
        if found:
            raise HostError(f"{self.name}: stopping server {handle.pid}: {'; '.join(found)}")

    def port_free(self, port: int) -> bool:
        """True if no TCP socket listens on ``port`` on the host (IPv4 or IPv6)."""
        wanted = f"{int(port):04X}"
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            text = self._read_range(table, 0, 64 << 20).decode("ascii", "replace")
            for line in text.splitlines()[1:]:
                fields = line.split()
                if (
                    len(fields) > 3
                    and fields[3] == "0A"
                    and fields[1].rpartition(":")[2].upper() == wanted
                ):
                    return False
        return True

    def find_orphans(self) -> list[ServerHandle]:
        """Servers that a killed tuner left alive under ``run_root``.

        A ``server.pid`` counts only if its process is alive with the start time and boot id its
        ``server.json`` recorded (a PID the kernel gave to another process is never returned),
        and if the tuner that started it is gone: a server of a tuner still running, on this
        machine or another, is nobody's orphan.
        """
        return [
            handle
            for handle, record in self._live_servers()
            if not owner_alive(cast("dict[str, Any] | None", record.get("owner")))
        ]

    def _live_servers(self) -> list[tuple[ServerHandle, dict[str, object]]]:
        """Every server under ``run_root`` whose recorded process is alive, with its record."""
        lines = self._checked(
            _shell.orphan_scan_script(self.run_root), "looking for servers", timeout=60.0
        ).stdout.splitlines()
        boot_id = lines[0].strip() if lines else ""
        found = []
        for line in lines[1:]:
            parts = line.split("\t")
            if len(parts) != 3:
                continue
            run_dir, pid, state = parts
            letter, _, starttime = state.partition(" ")
            if letter in ("Z", "X", "x"):
                continue
            try:
                record = json.loads(self.read_file(f"{run_dir}/server.json"))
                handle = ServerHandle.from_record(record)
            except (HostError, ValueError, KeyError, TypeError):
                continue  # no record: nothing proves the process is ours
            if handle.pid != int(pid) or handle.starttime != starttime:
                continue
            if handle.boot_id and boot_id and handle.boot_id != boot_id:
                continue
            found.append((handle, record))
        return found

    def cleanup_run_dirs(self, keep: int = 20, *, min_age_s: float = 3600.0) -> list[str]:
        """Remove the oldest run folders under ``run_root``, keeping the newest ``keep``.

        A folder holding a live server, a hidden folder (e.g. the patch journal) or one changed
        within ``min_age_s`` is never removed.

        Returns:
            The folders removed.
        """
        lines = self.run(_shell.run_dir_scan_script(self.run_root), timeout=60.0).stdout
        entries = []
        for line in lines.splitlines():
            mtime, _, path = line.partition("\t")
            try:
                entries.append((float(mtime), path))
            except ValueError:
                continue
        entries.sort(reverse=True)
        live = {handle.run_dir for handle, _ in self._live_servers()}
        now = time.time()
        root = self.run_root.rstrip("/") + "/"
        doomed = [
            path
            for mtime, path in entries[keep:]
            if path.startswith(root)
            and now - mtime >= min_age_s
            and not any(d == path or d.startswith(path + "/") for d in live)
        ]
        if doomed:
            self._checked(
                "rm -rf -- " + " ".join(shlex.quote(p) for p in doomed),
                "removing old run folders",
                timeout=120.0,
            )
        return doomed


def _url_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


def _port_from_argv(argv: list[str]) -> int | None:
    """The value of ``--port N`` / ``--port=N`` in a command line, if any."""
    for index, word in enumerate(argv):
        value = None
        if word == "--port" and index + 1 < len(argv):
            value = argv[index + 1]
        elif word.startswith("--port="):
            value = word.split("=", 1)[1]
        if value is not None and value.isdigit():
            return int(value)
    return None


def _complete_utf8_prefix(data: bytes) -> int:
    """Length of ``data`` without a UTF-8 sequence that its last bytes begin but do not finish."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # a lead byte or ASCII
            need = 1 if byte < 0x80 else 2 if byte >> 5 == 6 else 3 if byte >> 4 == 14 else 4
            return len(data) - back if need > back else len(data)
    return len(data)
