"""Fixtures shared by every test package.

``sshd``: a real OpenSSH server on 127.0.0.1 for the whole session (own keys, config and
known_hosts; see ``tests/support/sshd.py``). Tests skip with a clear message where
``/usr/sbin/sshd`` is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.support.sshd import SSHD_BINARY, SshServer


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshServer]:
    """A running sshd on 127.0.0.1.

    It has ``host``, ``port``, ``user``, ``key_path``, ``known_hosts_path``, ``host_key_path``,
    ``stop()``, ``restart(new_host_key=False)`` and ``drop_connections()``.
    """
    if not os.access(SSHD_BINARY, os.X_OK):
        pytest.skip(f"{SSHD_BINARY} is missing: apt-get install -y openssh-server")
    server = SshServer(tmp_path_factory.mktemp("sshd"))
    try:
        server.start()
        yield server
    finally:
        server.stop()
