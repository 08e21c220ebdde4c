"""The failure classes a FAIL trial carries: one vocabulary for the code that writes them and the
code that reads them.

A FAIL trial stores its class as text in its ``failure_reason`` user attribute (``oom-at-start``,
``unstable-at-1024``); :meth:`FailureClass.of` reads that text back, so studies written by any
version of the tuner load. Each class says whether the configuration is to blame (running it
again would fail again: the study reuses the failure instead), whether it is a capacity failure
(a memory-bound parameter went too far: the memory cliff learns its limit from it), and whether
it belongs to the values of the configuration wherever they are used.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["FailureClass"]


class FailureClass(StrEnum):
    """Why a trial failed. The value is the stored name (``UNSTABLE`` adds the concurrency level
    at which the server broke: :meth:`at`)."""

    STARTUP_CRASH = "startup-crash"  # the server died or logged a fatal line before it was ready
    OOM_AT_START = "oom-at-start"  # out of memory before it was ready
    UNSTABLE = "unstable-at"  # crashed or ran out of memory under load: ``unstable-at-<c>``
    HANG = "hang"  # stopped answering (a watchdog, a probe without answer)
    WRONG_OUTPUT = "wrong-output"  # answered, but garbage or an error
    TIMEOUT = "timeout"  # not ready, or a level not done, within its time limit
    MEASUREMENT_BOUND = "measurement-bound"  # the client, not the server, bounded every level
    HOST_ERROR = "host-error"  # the machine's problem (unreachable, GPUs held by another process)
    # the tuner running the trial died (no heartbeat, dead PID); a FAIL trial with no stored reason
    # is one the stale-trial check failed (every other FAIL stores its class)
    WORKER_DIED = "worker-died"
    INTERRUPTED = "interrupted"  # stopped by the user (Ctrl-C)

    @property
    def blamed(self) -> bool:
        """Whether the configuration is to blame: run again, it would fail again."""
        return self in _BLAMED

    @property
    def may_run_again(self) -> bool:
        """Whether the configuration may run again (the run failed, not the configuration)."""
        return not self.blamed

    @property
    def capacity(self) -> bool:
        """Whether a capacity parameter went too far (out of memory at start or under load)."""
        return self in (FailureClass.OOM_AT_START, FailureClass.UNSTABLE)

    @property
    def of_a_value(self) -> bool:
        """Whether the failure belongs to a value wherever it is used (refused at start, garbage
        output), so one value of the configuration can explain it."""
        return self in (FailureClass.STARTUP_CRASH, FailureClass.WRONG_OUTPUT)

    def at(self, concurrency: int | str) -> str:
        """The stored name of ``UNSTABLE`` at a concurrency level (``unstable-at-512``)."""
        if self is not FailureClass.UNSTABLE:
            raise ValueError(f"{self.value} has no concurrency level")
        return f"{self.value}-{concurrency}"

    @classmethod
    def of(cls, stored: str | None) -> FailureClass | None:
        """The class of a stored ``failure_reason`` (None: none stored, or no class of today
        names it). A stored name may carry a suffix (``unstable-at-512``)."""
        if not stored:
            return None
        for member in _LONGEST_FIRST:
            if stored.startswith(member.value):
                return member
        return None


_BLAMED = frozenset(
    {
        FailureClass.STARTUP_CRASH,
        FailureClass.OOM_AT_START,
        FailureClass.UNSTABLE,
        FailureClass.HANG,
        FailureClass.WRONG_OUTPUT,
        FailureClass.TIMEOUT,
    }
)
_LONGEST_FIRST = sorted(FailureClass, key=lambda member: -len(member.value))
