"""First contact: the shipped search space names ``gpu-host``, a placeholder, not a machine.

Run as shipped, without ``--host`` or ``--emulate``, the tuner says so in one line with both
fixes and exits 2 (:class:`ConfigError`) before it opens any connection. ``gpu-host`` is taken
for a real machine when ``~/.ssh/config`` gives it a ``HostName`` or ``/etc/hosts`` lists it;
no name lookup is made (it could take seconds to time out).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import paramiko

from tuner.errors import ConfigError
from tuner.space._problems import problem_message

if TYPE_CHECKING:
    from tuner.space import SearchSpace

__all__ = ["PLACEHOLDER_ADDRESS", "is_placeholder", "refuse_placeholder_host"]

PLACEHOLDER_ADDRESS = "gpu-host"


def _ssh_alias(address: str, ssh_config: Path) -> bool:
    if not ssh_config.is_file():
        return False
    try:
        found = paramiko.SSHConfig.from_path(str(ssh_config)).lookup(address)
    except (OSError, ValueError, paramiko.SSHException):
        return False
    return found.get("hostname", address) != address


def _in_hosts_file(address: str, hosts: Path) -> bool:
    try:
        lines = hosts.read_text(errors="replace").splitlines()
    except OSError:
        return False
    return any(address in line.split("#", 1)[0].split()[1:] for line in lines)


def is_placeholder(
    address: str, *, ssh_config: Path | None = None, hosts: Path = Path("/etc/hosts")
) -> bool:
    """Whether ``address`` is the shipped placeholder that names no machine here."""
    if address != PLACEHOLDER_ADDRESS:
        return False
    config = ssh_config or Path("~/.ssh/config").expanduser()
    return not (_ssh_alias(address, config) or _in_hosts_file(address, hosts))


def refuse_placeholder_host(
    space: SearchSpace, *, host_override: str | None, emulate: bool
) -> None:
    """Raise the one-line first-contact error when the run would go to the placeholder host.

    Raises:
        ConfigError: ``host.address`` is ``gpu-host`` (and names no machine here), with neither
            ``--host`` nor ``--emulate`` given.
    """
    host = getattr(space, "host", None)
    if emulate or host_override or host is None or not is_placeholder(host.address):
        return
    document = space.document
    path = ("host", "address")
    raise ConfigError(
        problem_message(
            document.file,
            document.line_of(path),
            path,
            f"{PLACEHOLDER_ADDRESS!r} is the shipped placeholder, not your GPU machine",
            "pass --host user@address (or set host.address to it), or add --emulate to run on "
            "the emulated host",
        )
    )
