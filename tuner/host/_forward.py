"""A local port forwarded to a port on the SSH host, over the connection the tuner already holds.

A remote server binds 127.0.0.1, so nothing on the network reaches its unauthenticated inference
API; the tuner's client reaches it through :class:`LocalForward`: a listener on 127.0.0.1 of the
tuner's machine whose every accepted connection becomes a ``direct-tcpip`` channel to the host's
127.0.0.1:PORT (what ``ssh -L`` and fabric's ``Connection.forward_local`` do). Unlike fabric's
``TunnelManager`` it accepts a full backlog at once (the load generator opens up to 1,024
connections in the same instant), opens each channel in that connection's own thread, and asks
for the current transport per connection, so a connection re-established after a drop serves the
next client.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from collections.abc import Callable

import paramiko

__all__ = ["LocalForward"]

_CHUNK = 1 << 16


class LocalForward:
    """Forward ``127.0.0.1:<local_port>`` here to ``remote_host:remote_port`` on the SSH host.

    Args:
        transport: returns the live paramiko transport (connecting again if needed).
        remote_port: the port on the host.
        remote_host: the address on the host the channel connects to.

    Attributes:
        local_port: the port the client connects to on this machine.
        channels: how many connections were forwarded so far.
    """

    def __init__(
        self,
        transport: Callable[[], paramiko.Transport],
        remote_port: int,
        remote_host: str = "127.0.0.1",
    ) -> None:
        self._transport = transport
        self.remote = (remote_host, int(remote_port))
        self.channels = 0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(socket.SOMAXCONN)
        self.local_port = int(self._listener.getsockname()[1])
        self._thread = threading.Thread(target=self._accept, name="ssh-forward", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, peer = self._listener.accept()
            except OSError:
                return  # closed
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            threading.Thread(
                target=self._serve, args=(client, peer), name="ssh-forward-conn", daemon=True
            ).start()

    def _serve(self, client: socket.socket, peer: tuple[str, int]) -> None:
        try:
            channel = self._transport().open_channel("direct-tcpip", self.remote, peer, timeout=30)
        except Exception:  # noqa: BLE001 - host unreachable or forwarding refused: drop the client
            client.close()
            return
        with self._lock:
            self.channels += 1
        try:
            _pump(client, channel, self._closed)
        finally:
            with contextlib.suppress(Exception):
                channel.close()
            client.close()

    def close(self) -> None:
        """Stop accepting; connections in flight end with their channels."""
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()


def _pump(client: socket.socket, channel: paramiko.Channel, closed: threading.Event) -> None:
    """Copy both ways until either side ends (a half-close is passed on, then the other side
    is drained to its end)."""
    try:
        _copy(client, channel, closed)
    except (OSError, EOFError, paramiko.SSHException):
        return  # either side broke off: the caller closes both


def _copy(client: socket.socket, channel: paramiko.Channel, closed: threading.Event) -> None:
    # poll, not select: with 1,024 streams the descriptors go past select's limit of 1,024.
    poller = select.poll()
    poller.register(client, select.POLLIN)
    poller.register(channel, select.POLLIN)
    client_open = channel_open = True
    while (client_open or channel_open) and not closed.is_set():
        ready = {fd for fd, _ in poller.poll(1000)}
        if client_open and client.fileno() in ready:
            data = client.recv(_CHUNK)
            if data:
                channel.sendall(data)
            else:
                client_open = False
                poller.unregister(client)
                channel.shutdown_write()
        if channel_open and channel.fileno() in ready:
            while channel.recv_ready() or channel.closed or channel.eof_received:
                data = channel.recv(_CHUNK)
                if not data:
                    channel_open = False
                    poller.unregister(channel)
                    with contextlib.suppress(OSError):
                        client.shutdown(socket.SHUT_WR)
                    break
                client.sendall(data)
        if not channel_open and not client_open:
            return
        if channel.closed and not channel.recv_ready():
            return
