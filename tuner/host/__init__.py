"""The host layer: run commands and servers on the GPU host, here or over SSH, the same way.

``open_host(spec)`` gives a :class:`LocalHost` for ``address: local`` and an :class:`SshHost`
otherwise. Both share the server lifecycle of :class:`Host` (start detached in an own process
group, follow the log, stop with SIGTERM then SIGKILL, wait for the port and the GPUs, find
orphans of a killed run, clean old run folders). :class:`HostClaim` makes a run the only tuner
on its host (``<run_root>/tuner.claim``); :class:`HostBusy` says another tuner holds it.
"""

from __future__ import annotations

from tuner.host._base import READ_BACK_S, Host
from tuner.host._claim import STALE_AFTER_S, HeldClaim, HostBusy, HostClaim, read_claim
from tuner.host._local import LocalHost
from tuner.host._ssh import SshHost
from tuner.host._types import CommandResult, HostSpec, ServerHandle

__all__ = [
    "READ_BACK_S",
    "STALE_AFTER_S",
    "CommandResult",
    "HeldClaim",
    "Host",
    "HostBusy",
    "HostClaim",
    "HostSpec",
    "LocalHost",
    "ServerHandle",
    "SshHost",
    "open_host",
    "read_claim",
]


def open_host(spec: HostSpec) -> Host:
    """The host ``spec`` describes. SSH connects lazily, on the first call that needs it."""
    if spec.is_local:
        return LocalHost(spec.run_root)
    return SshHost(spec)
