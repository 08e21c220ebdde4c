""":class:`SshHost`: the host layer over SSH, one reused ``fabric.Connection``.

Host keys are checked against ``known_hosts`` (paramiko ``RejectPolicy``); ``accept_new_host_key``
records the key of a host seen for the first time (OpenSSH's ``accept-new``), and a key that
differs from the recorded one is always refused. A connection found lost raises
:class:`~tuner.errors.HostError` once, so the trial in progress fails; the next call connects
again (one attempt).
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath
from typing import TypeVar

import fabric
import paramiko
from invoke.exceptions import CommandTimedOut

from tuner.errors import ConfigError, HostError
from tuner.host import _shell
from tuner.host._base import LOOPBACK, WILDCARDS, Host
from tuner.host._forward import LocalForward
from tuner.host._types import CommandResult, HostSpec

__all__ = ["SshHost"]

_T = TypeVar("_T")


def _open_new(sftp: paramiko.SFTPClient, path: str, mode: int) -> paramiko.SFTPFile:
    """Create ``path`` (it must not exist) for writing with permissions ``mode`` given in the
    SFTP OPEN request itself: the server creates it so (``open(2)`` with that mode, under its
    umask), never readable by others for an instant, as a create-then-chmod would leave it.
    Paramiko's ``SFTPClient.open`` sends no attributes, hence its request primitive here."""
    attributes = paramiko.SFTPAttributes()
    attributes.st_mode = mode
    flags = (
        paramiko.sftp.SFTP_FLAG_WRITE
        | paramiko.sftp.SFTP_FLAG_CREATE
        | paramiko.sftp.SFTP_FLAG_EXCL
    )
    kind, message = sftp._request(  # type: ignore[attr-defined]  # paramiko has no public O_EXCL open
        paramiko.sftp.CMD_OPEN, path, flags, attributes
    )
    if kind != paramiko.sftp.CMD_HANDLE:
        raise paramiko.SFTPError(f"opening {path}: expected a handle")
    return paramiko.SFTPFile(sftp, message.get_binary(), "wb")


# Before the script, the shell writes one line on stderr: the process group the command runs in
# and its leader's start time (``/proc/PID/stat`` field 22), so that a command that times out can
# be killed with its group (sshd starts each command in a session of its own; closing the channel
# alone leaves it running on the host).
_GROUP_LINE = b"tuner-run-group "
_EXEC = "sh -c " + shlex.quote(
    r"""{ read -r l < "/proc/$$/stat"; set -- ${l##*) }; g=$3; read -r l < "/proc/$g/stat"; """
    r"""set -- ${l##*) }; t=${20}; } 2>/dev/null; set --; """
    r"""printf 'tuner-run-group %s %s\n' "$g" "$t" >&2; unset l g t; """ + _shell.FROM_STDIN
)


def _split_group_line(err: bytearray) -> tuple[tuple[int, str] | None, bytearray]:
    """The (PGID, leader start time) the command's shell reported first on stderr, and the
    command's own stderr after it; None while the line is not complete (or was not written)."""
    if not err.startswith(_GROUP_LINE) or b"\n" not in err:
        return None, err
    line, _, rest = bytes(err).partition(b"\n")
    fields = line[len(_GROUP_LINE) :].split()
    if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit() and int(fields[0]) > 1:
        return (int(fields[0]), fields[1].decode()), bytearray(rest)
    return None, bytearray(rest)


def _kill_group(transport: paramiko.Transport, group: tuple[int, str]) -> None:
    """SIGKILL a timed-out command's process group on the host, on a channel of its own; only
    while the group's leader is gone or is still the process that reported it (same start time),
    so that a PID the host has given to another process is never signalled."""
    pgid, starttime = group
    script = (
        f"{{ read -r l < /proc/{pgid}/stat; set -- ${{l##*) }}; t=${{20}}; }} 2>/dev/null; "
        f'if [ -z "$t" ] || [ "$t" = {shlex.quote(starttime)} ]; then kill -KILL "-{pgid}"; fi'
    )
    channel = transport.open_session(timeout=30)
    try:
        channel.settimeout(30)
        channel.exec_command("sh -c " + shlex.quote(script))
        channel.recv_exit_status()
    finally:
        channel.close()


def _exec_with_stdin(
    connection: fabric.Connection, script: bytes, timeout: float, name: str
) -> CommandResult:
    """Run ``script`` through ``sh`` on a new channel, fed on stdin; collect its output.

    Raises:
        HostError: not finished after ``timeout`` seconds (its process group is killed on the
            host and the channel closed).
    """
    transport = connection.client.get_transport()
    if transport is None:
        raise EOFError("no transport")
    channel = transport.open_session(timeout=30)
    try:
        channel.exec_command(_EXEC)
        channel.sendall(script)
        channel.shutdown_write()
        poller = select.poll()  # not select(): the load generator's sockets take low descriptors
        poller.register(channel, select.POLLIN)
        out, err = bytearray(), bytearray()
        group: tuple[int, str] | None = None
        head = True  # the group line not yet split off stderr
        deadline = time.monotonic() + timeout
        while True:
            while channel.recv_ready():
                out += channel.recv(1 << 16)
            while channel.recv_stderr_ready():
                err += channel.recv_stderr(1 << 16)
            if head and (
                b"\n" in err or len(err) >= len(_GROUP_LINE) and not err.startswith(_GROUP_LINE)
            ):
                group, err = _split_group_line(err)
                head = False
            if (
                channel.exit_status_ready()
                and not channel.recv_ready()
                and not (channel.recv_stderr_ready())
            ):
                if channel.eof_received or channel.closed:
                    break
            if time.monotonic() > deadline:
                if group is not None:
                    with contextlib.suppress(Exception):  # the timeout is reported either way
                        _kill_group(transport, group)
                raise HostError(f"{name}: a command timed out after {timeout:g} s")
            if not transport.is_active():
                raise EOFError("the SSH transport closed")
            poller.poll(20)
        if head:
            _, err = _split_group_line(err)
        return CommandResult(
            channel.recv_exit_status(),
            out.decode("utf-8", errors="replace"),
            err.decode("utf-8", errors="replace"),
        )
    finally:
        channel.close()


class _AcceptNewPolicy(paramiko.MissingHostKeyPolicy):
    """Accept an unknown host's key and append it to the known_hosts file (never a changed one)."""

    def __init__(self, known_hosts: Path) -> None:
        self._known_hosts = known_hosts

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> None:
        client.get_host_keys().add(hostname, key.get_name(), key)
        self._known_hosts.parent.mkdir(parents=True, exist_ok=True)
        with self._known_hosts.open("a") as stream:
            stream.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")


class SshHost(Host):
    """A host reached over SSH.

    Args:
        spec: address, user, port, key and known_hosts; unset values come from ``~/.ssh/config``.

    Raises:
        ConfigError: an ``ssh_config`` or ``key_path`` that does not exist.
    """

    def __init__(self, spec: HostSpec) -> None:
        self._spec = spec
        self._lock = threading.RLock()
        self._sftp_lock = threading.Lock()
        self._connection: fabric.Connection | None = None
        if spec.ssh_config and not Path(spec.ssh_config).expanduser().is_file():
            raise ConfigError(
                f"host.ssh_config: {spec.ssh_config} does not exist; "
                "fix: give an existing ssh config file"
            )
        if spec.key_path and not Path(spec.key_path).expanduser().is_file():
            raise ConfigError(
                f"host.key (or --ssh-key): {spec.key_path} does not exist; fix: give "
                "the path of an existing private key"
            )
        if spec.ssh_config:
            self._config = fabric.Config(runtime_ssh_path=str(Path(spec.ssh_config).expanduser()))
        else:
            self._config = fabric.Config()
        probe = self._new_connection()
        self.name = f"{probe.user}@{probe.host}:{probe.port}"
        self.address = probe.host
        self.run_root = spec.run_root
        self.known_hosts = self._known_hosts_path(probe)
        self.connections = 0  # how many times a connection was opened
        self._forwards: dict[tuple[str, int], LocalForward] = {}

    # -- connection -----------------------------------------------------------------------------

    def _new_connection(self) -> fabric.Connection:
        spec = self._spec
        connect_kwargs: dict[str, object] = {}
        if spec.key_path:
            connect_kwargs = {
                "key_filename": [str(Path(spec.key_path).expanduser())],
                "look_for_keys": False,
                "allow_agent": False,
            }
        return fabric.Connection(
            spec.address,
            user=spec.user,
            port=spec.port,
            # a copy: Connection merges into its config, and a Ctrl-C landing in that merge
            # must not leave the shared one empty for every later connection
            config=self._config.clone(),
            connect_timeout=max(1, math.ceil(spec.connect_timeout_s)),
            connect_kwargs=connect_kwargs,
        )

    def _known_hosts_path(self, connection: fabric.Connection) -> Path:
        configured = self._spec.known_hosts or connection.ssh_config.get("userknownhostsfile")
        first = (configured or "~/.ssh/known_hosts").split()[0]
        return Path(first).expanduser()

    def _open(self) -> fabric.Connection:
        connection = self._new_connection()
        client = connection.client
        if self.known_hosts.is_file():
            client.get_host_keys().load(str(self.known_hosts))
        if self._spec.accept_new_host_key:
            client.set_missing_host_key_policy(_AcceptNewPolicy(self.known_hosts))
        else:
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            connection.open()
        except paramiko.BadHostKeyException as error:
            connection.close()
            entry = (
                f"[{connection.host}]:{connection.port}"
                if connection.port != 22
                else connection.host
            )
            raise HostError(
                f"{self.name}: host key CHANGED (server offers {error.key.get_name()} "
                f"{error.key.fingerprint}, {self.known_hosts} has another): refusing to connect; "
                f"if the host was really reinstalled, remove the old key with "
                f"`ssh-keygen -R '{entry}' -f {self.known_hosts}` and connect again"
            ) from None
        except paramiko.AuthenticationException as error:
            connection.close()
            raise HostError(
                f"{self.name}: SSH authentication failed ({error}): check host.user and "
                f"host.key_path (or IdentityFile in ~/.ssh/config)"
            ) from None
        except paramiko.SSHException as error:
            connection.close()
            if "not found in known_hosts" in str(error):
                raise HostError(
                    f"{self.name}: host key unknown ({self.known_hosts} has no entry): check its "
                    f"fingerprint and add it with `ssh-keyscan -p {connection.port} "
                    f"{connection.host} >> {self.known_hosts}`, or set "
                    f"host.accept_new_host_key: true"
                ) from None
            raise HostError(f"{self.name}: SSH failed: {error}") from None
        except (OSError, EOFError) as error:
            connection.close()
            raise HostError(
                f"{self.name}: cannot connect ({error}): check host.address and host.port, "
                f"and that sshd runs there"
            ) from None
        if connection.transport is not None:  # idle links through NAT stay open, dead ones show
            connection.transport.set_keepalive(15)
        self.connections += 1
        return connection

    def _ensure(self) -> fabric.Connection:
        with self._lock:
            if self._connection is not None and not self._connection.is_connected:
                self._discard()
                raise HostError(
                    f"{self.name}: the SSH connection was lost; "
                    "it is re-established on the next call"
                )
            if self._connection is None:
                self._connection = self._open()
            return self._connection

    def _discard(self) -> None:
        with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):  # a broken connection may fail to close
                connection.close()

    def _call(self, what: str, action: Callable[[fabric.Connection], _T]) -> _T:
        """Run ``action`` on the connection; a connection lost meanwhile raises HostError."""
        connection = self._ensure()
        try:
            result = action(connection)
        except CommandTimedOut as error:
            raise HostError(f"{self.name}: {what} timed out after {error.timeout:g} s") from None
        except (paramiko.SSHException, EOFError, OSError) as error:
            if connection.is_connected and isinstance(error, OSError):
                raise HostError(f"{self.name}: {what} failed: {error}") from None
            self._discard()
            raise HostError(
                f"{self.name}: the SSH connection was lost during {what} "
                f"({error or type(error).__name__}); "
                f"it is re-established on the next call"
            ) from None
        if not connection.is_connected:
            self._discard()
            raise HostError(
                f"{self.name}: the SSH connection was lost during {what}; "
                f"it is re-established on the next call"
            )
        return result

    def reconnect(self) -> None:
        """Close the connection and open a new one (HostError if the host cannot be reached)."""
        self._discard()
        self._ensure()

    def close(self) -> None:
        with self._lock:
            forwards, self._forwards = list(self._forwards.values()), {}
        for forward in forwards:
            forward.close()
        self._discard()

    def client_url(self, port: int, bind: str | None) -> str:
        """A server bound to loopback on the host is reached through a local port forwarded
        over this SSH connection (:class:`LocalForward`; ``forward`` of the spec: not when the
        host is this machine's loopback, unless asked); one bound to a wildcard or another
        address directly at that address."""
        if bind and bind not in LOOPBACK:
            return (
                super().client_url(port, bind)
                if bind not in WILDCARDS
                else (f"http://{self.address}:{int(port)}")
            )
        remote = "127.0.0.1" if bind in (None, "", "localhost") else bind
        setting = self._spec.forward
        if setting is False or (setting is None and self.address in LOOPBACK):
            return f"http://{remote if ':' not in remote else f'[{remote}]'}:{int(port)}"
        with self._lock:
            forward = self._forwards.get((remote, int(port)))
            if forward is None:
                forward = LocalForward(self._transport, int(port), remote)
                self._forwards[(remote, int(port))] = forward
        return f"http://127.0.0.1:{forward.local_port}"

    def _transport(self) -> paramiko.Transport:
        transport = self._ensure().transport
        if transport is None:
            raise HostError(f"{self.name}: the SSH connection has no transport")
        return transport

    def abandon(self) -> None:
        """Close the connection under the command in flight (called from a signal handler, so
        without the lock the interrupted thread may hold); the next call connects again."""
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()

    def sibling(self) -> SshHost:
        """A second SshHost on the same spec: it connects on its first call, separately."""
        return SshHost(self._spec)

    # -- primitives -----------------------------------------------------------------------------

    def run(
        self, command: str, *, timeout: float = 60.0, env: Mapping[str, str] | None = None
    ) -> CommandResult:
        """Run ``command`` with ``sh`` on the host (whatever the user's login shell is).

        The script, with the environment it exports, goes on the channel's stdin: the only
        command line the host sees is ``sh -c 'eval "$(cat)"'``, so ``ps`` there shows no value.
        """
        script = (_shell.env_exports(env) + command).encode()

        def action(connection: fabric.Connection) -> CommandResult:
            return _exec_with_stdin(connection, script, timeout, self.name)

        return self._call("a command", action)

    def read_file(self, path: str) -> bytes:
        def action(connection: fabric.Connection) -> bytes:
            with self._sftp_lock, connection.sftp().open(path, "rb") as stream:
                return stream.read()

        return self._call(f"reading {path}", action)

    def write_file(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        parent = str(PurePosixPath(path).parent)
        temporary = f"{parent}/.{PurePosixPath(path).name}.{uuid.uuid4().hex[:8]}"
        made = self.run(f"umask 077 && mkdir -p -- {shlex.quote(parent)}")  # new folders 0700
        if not made.ok:
            raise HostError(f"{self.name}: cannot create {parent} ({made.summary()})")

        def action(connection: fabric.Connection) -> None:
            with self._sftp_lock:
                sftp = connection.sftp()
                kept = mode
                if kept is None:
                    try:
                        kept = sftp.stat(path).st_mode
                    except FileNotFoundError:
                        kept = None
                created = 0o600 if mode is None else mode & 0o7777
                try:
                    with _open_new(sftp, temporary, created) as stream:
                        stream.write(data)
                    if kept is not None:  # exactly, whatever the server's umask took away
                        sftp.chmod(temporary, kept & 0o7777)
                    sftp.posix_rename(temporary, path)
                except BaseException:
                    with contextlib.suppress(OSError, paramiko.SSHException, EOFError):
                        sftp.remove(temporary)
                    raise

        self._call(f"writing {path}", action)

    def exists(self, path: str) -> bool:
        def action(connection: fabric.Connection) -> bool:
            with self._sftp_lock:
                try:
                    connection.sftp().lstat(path)
                except FileNotFoundError:
                    return False
                return True

        return self._call(f"looking for {path}", action)

    def fetch(self, remote_path: str, local_path: str) -> None:
        os.makedirs(os.path.dirname(os.path.abspath(local_path)), exist_ok=True)

        def action(connection: fabric.Connection) -> None:
            with self._sftp_lock:
                connection.sftp().get(remote_path, local_path)

        self._call(f"fetching {remote_path}", action)

    def _read_range(self, path: str, offset: int, limit: int) -> bytes:
        def action(connection: fabric.Connection) -> bytes:
            with self._sftp_lock:
                try:
                    stream = connection.sftp().open(path, "rb")
                except FileNotFoundError:
                    return b""
                with stream:
                    stream.seek(offset)
                    try:
                        return stream.read(limit)
                    except OSError:
                        if path.startswith("/proc/") and connection.is_connected:
                            return b""  # the process ended between open and read
                        raise

        return self._call(f"reading {path}", action)
