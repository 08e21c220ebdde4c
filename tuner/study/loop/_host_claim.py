"""The host claim as ``tuner optimize`` and ``tuner validate`` take it: one tuner per host.

:class:`tuner.host.HostClaim` does the work (``<run_root>/tuner.claim``); this says on the
console what a user needs to know: that a claim left by a killed tuner was taken over, or that
another tuner took this run's claim over meanwhile.
"""

from __future__ import annotations

from rich.console import Console

from tuner.host import HostClaim
from tuner.study.trial import Target

__all__ = ["claim_host", "release_host"]


def claim_host(target: Target, study_name: str, console: Console) -> HostClaim:
    """Claim the target's host for this run.

    Raises:
        ConfigError: the run root is another user's, or writable by group or others.
        HostBusy: another tuner holds it (nothing on the host was changed).
        HostError: the host cannot be reached.
    """
    target.host.secure_run_root()  # ~/ made absolute, created 0700; refused if others can write
    claim = HostClaim(target.host, target.run_root, study=study_name)
    claim.acquire()
    takeover = claim.describe_takeover()
    if takeover:
        console.print(takeover, highlight=False, markup=False)
    return claim


def release_host(claim: HostClaim, console: Console) -> None:
    """Release the claim; warn when another tuner took it over during the run."""
    claim.release()
    if claim.lost:
        console.print(
            f"the claim of {claim.host.name}:{claim.path} was taken over by another tuner during "
            "this run: measurements since then may be disturbed",
            style="yellow",
            highlight=False,
            markup=False,
        )
