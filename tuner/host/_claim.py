"""One tuner at a time per host: a claim file under the host's run root.

Two tuners driving one GPU host undo each other: the second reverts the first one's source
patches when it starts, its servers want the same port and the same GPUs, and both studies then
record measurements of configurations that were not what they say. Each host runs one trial at a
time, so ``tuner optimize`` and ``tuner validate`` claim the host first.

The claim is ``<run_root>/tuner.claim``: a JSON record of its owner (machine, PID and kernel start
time of the tuner), the study and when it was taken, plus a random token. It is created with the
shell's ``noclobber`` (``O_EXCL``: of two tuners starting together exactly one gets it), its
modification time is refreshed every ``refresh_s`` by a daemon thread while the run lasts, and it
is removed at the end if it is still ours. A claim whose owner is known to be gone (a tuner on this
machine that no longer runs) or that was not refreshed for ``stale_after_s`` (by the host's own
clock) was left by a killed tuner and is taken over; any other refuses the run with one line
naming the owner and the fix, before the host is touched.

Taking over is safe too: tuners taking over serialise on an ``flock`` of the run root, check that
the claim is still the very file judged stale (same inode, modification time and size: one
refreshed or replaced meanwhile is left alone) and replace it with a rename, so that the claim's
path never goes missing for a tuner creating it at the same moment.
"""

from __future__ import annotations

import json
import secrets
import shlex
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Self

from tuner.errors import HostError, TunerError
from tuner.host._base import Host
from tuner.host._owner import current_owner, owner_alive

__all__ = ["CLAIM_NAME", "STALE_AFTER_S", "HeldClaim", "HostBusy", "HostClaim", "read_claim"]

CLAIM_NAME = "tuner.claim"
REFRESH_S = 30.0  # how often a running tuner renews its claim
STALE_AFTER_S = 300.0  # a claim not renewed for this long was left by a killed tuner
_ATTEMPTS = (
    3  # take, or take over, this many times before giving up on a claim that keeps changing
)


class HostBusy(TunerError):
    """Another tuner holds the host (exit code 1; nothing on the host was changed)."""


@dataclass(frozen=True)
class HeldClaim:
    """A claim found on the host.

    Attributes:
        record: its JSON record (empty if unreadable, e.g. written by hand).
        age_s: seconds since it was last refreshed, by the host's clock.
        identity: ``"INODE MTIME SIZE"``: tells this very file from a later one.
    """

    record: dict[str, Any] = field(default_factory=dict)
    age_s: float = 0.0
    identity: str = ""

    @property
    def owner(self) -> dict[str, Any]:
        owner = self.record.get("owner")
        return owner if isinstance(owner, dict) else {}

    @property
    def study(self) -> str | None:
        study = self.record.get("study")
        return str(study) if study else None

    @property
    def owner_gone(self) -> bool:
        """True when its tuner ran on this machine and no longer runs."""
        return bool(self.owner) and not owner_alive(self.owner)

    @property
    def mine(self) -> bool:
        """True when this very process holds it."""
        return bool(self.owner) and self.owner == current_owner()

    def stale(self, stale_after_s: float) -> bool:
        return self.owner_gone or self.age_s > stale_after_s

    def who(self) -> str:
        """``tuner PID 123 on machine (study s)``."""
        owner = self.owner
        if not owner:
            return "another tuner (the claim names no owner)"
        study = f" (study {self.study})" if self.study else ""
        return f"tuner PID {owner.get('pid', '?')} on {owner.get('host', '?')}{study}"

    def why_stale(self, stale_after_s: float) -> str:
        if self.owner_gone:
            return f"that tuner is gone, last refreshed {self.age_s:.0f} s ago"
        return f"not refreshed for {self.age_s:.0f} s (more than {stale_after_s:.0f} s)"


def _claim_path(run_root: str) -> tuple[str, str]:
    root = run_root.rstrip("/") or "/"
    return root, f"{root.rstrip('/')}/{CLAIM_NAME}"


# Shell lines that set ``seen`` to ``INODE MTIME SIZE`` of the claim (empty when there is none);
# a claim created this instant may still be empty, so it is waited for up to 1 s to be written.
_SEEN = """n=0
while [ -e {claim} ] && [ ! -s {claim} ] && [ "$n" -lt 10 ]; do sleep 0.1; n=$((n + 1)); done
seen=$(stat -c '%i %Y %s' -- {claim} 2>/dev/null)
"""
# Print ``held``, then ``INODE MTIME SIZE NOW`` (epoch seconds by the host's clock), then the
# first line of the claim.
_PRINT_HELD = """echo held
printf '%s %s\\n' "$seen" "$(date +%s)"
head -c 4096 -- {claim} | head -n 1
"""


def _take_script(root: str, claim: str, record: str) -> str:
    """Create the claim unless it exists: print ``taken``, or what :data:`_PRINT_HELD` prints."""
    q_claim = shlex.quote(claim)
    create = f"(set -C; printf '%s\\n' {shlex.quote(record)} > {q_claim}) 2>&1"
    return (
        "umask 077\n"  # the claim, like everything the tuner makes on the host, is private
        f"mkdir -p -- {shlex.quote(root)} || exit 3\n"
        "i=0\n"
        "while :; do\n"
        f"if err=$( {create} ); then echo taken; exit 0; fi\n"
        + _SEEN.format(claim=q_claim)
        + '[ -n "$seen" ] && break\n'
        # neither created nor there: removed meanwhile (try again) or not writable (give up)
        + 'i=$((i + 1)); if [ "$i" -ge 5 ]; then printf \'%s\\n\' "$err" >&2; exit 4; fi\n'
        "done\n" + _PRINT_HELD.format(claim=q_claim)
    )


def _read_script(claim: str) -> str:
    """Print ``free`` when there is no claim, else what :data:`_PRINT_HELD` prints."""
    q_claim = shlex.quote(claim)
    return (
        _SEEN.format(claim=q_claim)
        + '[ -n "$seen" ] || { echo free; exit 0; }\n'
        + _PRINT_HELD.format(claim=q_claim)
    )


def _replace_script(root: str, claim: str, record: str, identity: str) -> str:
    """Replace the stale claim ``identity`` names; print ``taken``, or ``raced`` when the claim
    changed since it was judged.

    Tuners taking over serialise on an ``flock`` of the run root (released by the kernel if this
    script dies), so a claim one of them just wrote is never judged by the other from an old
    reading; the claim is replaced by a rename, so its path never goes missing and a tuner
    creating it with ``noclobber`` meanwhile finds it there.
    """
    q_claim = shlex.quote(claim)
    q_new = shlex.quote(f"{claim}.new-{secrets.token_hex(4)}")
    return (
        "umask 077\n"
        f"exec 9< {shlex.quote(root)} || exit 3\n"
        "if command -v flock >/dev/null 2>&1; then flock -w 20 9 || { echo raced; exit 0; }; fi\n"
        f"[ \"$(stat -c '%i %Y %s' -- {q_claim} 2>/dev/null)\" = {shlex.quote(identity)} ] "
        "|| { echo raced; exit 0; }\n"
        f"if printf '%s\\n' {shlex.quote(record)} > {q_new} && mv -f -- {q_new} {q_claim}; then\n"
        "  echo taken\n"
        "else\n"
        f"  rm -f -- {q_new}; exit 4\n"
        "fi\n"
    )


def _if_ours(claim: str, token: str, action: str) -> str:
    return f"grep -qF {shlex.quote(token)} {shlex.quote(claim)} 2>/dev/null && {action}"


def _parse_held(lines: list[str]) -> HeldClaim:
    """The claim described after a ``held`` line (see :data:`_PRINT_HELD`)."""
    index = lines.index("held")
    meta = lines[index + 1].split() if len(lines) > index + 1 else []
    content = lines[index + 2] if len(lines) > index + 2 else ""
    try:
        record = json.loads(content)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        record = {}  # unreadable (e.g. written by hand): judged by its age only
    try:
        age = max(0.0, float(meta[3]) - float(meta[1]))
    except (IndexError, ValueError):
        age = 0.0
    return HeldClaim(record, age, " ".join(meta[:3]))


def _checked_run(host: Host, script: str, what: str) -> list[str]:
    result = host.run(script, timeout=60.0)
    if not result.ok:
        raise HostError(f"{host.name}: could not {what} ({result.summary()})")
    return [line.strip() for line in result.stdout.splitlines()]


def read_claim(host: Host, run_root: str) -> HeldClaim | None:
    """The claim on the host's ``run_root``, or None (read only: nothing is changed).

    Raises:
        HostError: the host cannot be reached.
    """
    _, path = _claim_path(run_root)
    lines = _checked_run(host, _read_script(path), f"read {path}")
    return _parse_held(lines) if "held" in lines else None


class HostClaim:
    """The claim of one host's run root for the length of a ``with`` block.

    Args:
        host: the host; the refresher uses its own connection to it (:meth:`Host.sibling`), so
            that it never takes a lost connection's error from the run.
        run_root: the folder on the host whose runs this claim covers (created if missing).
        study: the study's name, for the message another tuner shows.
        refresh_s: how often the claim's modification time is renewed.
        stale_after_s: a claim not renewed for this long is taken over.

    Attributes:
        taken_over: the stale claim replaced on entry, if any.
        lost: set when a refresh or the release found that the claim is no longer ours (another
            tuner judged it stale and took it over meanwhile).

    Raises (on entry):
        HostBusy: another live tuner holds the host.
        HostError: the host cannot be reached, or the run root cannot be written.
    """

    def __init__(
        self,
        host: Host,
        run_root: str,
        *,
        study: str,
        refresh_s: float = REFRESH_S,
        stale_after_s: float = STALE_AFTER_S,
    ) -> None:
        if not 0 < refresh_s < stale_after_s:
            raise ValueError(f"need 0 < refresh_s ({refresh_s}) < stale_after_s ({stale_after_s})")
        self.host, self.study = host, study
        self.root, self.path = _claim_path(run_root)
        self.refresh_s, self.stale_after_s = refresh_s, stale_after_s
        self.token = secrets.token_hex(8)
        self.taken_over: HeldClaim | None = None
        self.lost = False
        self._held = False
        self._stop = threading.Event()
        self._refresher: threading.Thread | None = None

    def record(self) -> dict[str, Any]:
        return {
            "owner": current_owner(),
            "study": self.study,
            "taken_at": time.time(),
            "token": self.token,
        }

    def __enter__(self) -> Self:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def describe_takeover(self) -> str | None:
        """One line about the stale claim replaced on entry (None if there was none)."""
        if self.taken_over is None:
            return None
        return (
            f"took over the claim of {self.host.name}:{self.path} left by "
            f"{self.taken_over.who()}: {self.taken_over.why_stale(self.stale_after_s)}"
        )

    def acquire(self) -> None:
        """Take the claim (or take over a stale one) and start refreshing it."""
        if self._held:
            raise RuntimeError("this claim is held already")
        record = json.dumps(self.record(), separators=(",", ":"))
        for _ in range(_ATTEMPTS):
            lines = _checked_run(
                self.host, _take_script(self.root, self.path, record), f"claim {self.path}"
            )
            if "taken" in lines:
                break
            if "held" not in lines:
                raise HostError(
                    f"{self.host.name}: claiming {self.path} printed {' | '.join(lines)[-200:]!r}"
                )
            held = _parse_held(lines)
            if not held.stale(self.stale_after_s):
                raise HostBusy(self._busy_message(held))
            replaced = _checked_run(
                self.host,
                _replace_script(self.root, self.path, record, held.identity),
                f"take over {self.path}",
            )
            if "taken" in replaced:
                self.taken_over = held
                break
            # another tuner changed the claim meanwhile: look again
        else:
            raise HostBusy(
                f"{self.host.name}:{self.path} kept changing while this tuner tried to claim it "
                "(another tuner is starting); fix: run one tuner per host (give this one another --host)"
            )
        self._held = True
        self._stop.clear()
        self._refresher = threading.Thread(target=self._refresh, name="host-claim", daemon=True)
        self._refresher.start()

    def release(self) -> None:
        """Stop refreshing and remove the claim if it is still ours (errors are not raised: the
        claim then goes stale and the next run takes it over)."""
        if not self._held:
            return
        self._held = False
        self._stop.set()
        if self._refresher is not None:
            self._refresher.join(timeout=5.0)
            self._refresher = None
        try:
            result = self.host.run(
                _if_ours(self.path, self.token, f"rm -f -- {shlex.quote(self.path)}")
                + " || echo lost",
                timeout=30.0,
            )
        except HostError:
            return
        if "lost" in result.stdout.split():
            self.lost = True  # taken over meanwhile: that claim is someone else's now, left alone

    def _refresh(self) -> None:
        # its own connection: a lost one raises its error once, and that belongs to the run
        try:
            host = self.host.sibling()
        except Exception:  # noqa: BLE001 - a second handle could not be made: share the run's
            host = self.host
        try:
            while not self._stop.wait(self.refresh_s):
                try:
                    # touch -c: never re-creates a claim that release() removed meanwhile
                    result = host.run(
                        _if_ours(self.path, self.token, f"touch -c -- {shlex.quote(self.path)}"),
                        timeout=30.0,
                    )
                except HostError:
                    continue  # the host is unreachable for now; the trial loop notices that itself
                if not result.ok and not self._stop.is_set():
                    self.lost = True
                    return
        finally:
            if host is not self.host:
                host.close()

    def _busy_message(self, held: HeldClaim) -> str:
        return (
            f"{self.host.name}:{self.path}: the host is in use by {held.who()}, refreshed "
            f"{held.age_s:.0f} s ago; fix: run one tuner per host (give this one another --host), or "
            f"wait for it to end (a claim not refreshed for {self.stale_after_s:.0f} s is taken over)"
        )
