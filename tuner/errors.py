"""Exceptions shared by every part of the tuner, and the exit code each one maps to.

Bad input (exit 2) is a :class:`ConfigError`; a failure while running (exit 1) is any other
:class:`TunerError`. Messages are one line: they name the file, the field and the fix.
"""

from __future__ import annotations

import time

from tuner.failures import FailureClass

__all__ = [
    "TunerError",
    "ConfigError",
    "HostError",
    "NoAnswerInTime",
    "ServerFailure",
    "FailureClass",
]


class TunerError(Exception):
    """A failure while running: exit code 1."""

    exit_code = 1


class ConfigError(TunerError):
    """Bad input (a YAML mistake, an invalid option, a missing study): exit code 2."""

    exit_code = 2


class HostError(TunerError):
    """The host could not be reached or a command on it failed unexpectedly."""


class NoAnswerInTime(TunerError):
    """A request to the server got no answer within its time limit (the server may hang)."""


class ServerFailure(TunerError):
    """The inference server crashed, hung or answered wrongly.

    Attributes:
        reason: the stored name of a :class:`FailureClass` (``unstable-at-512`` for a crash at
            level 512).
        failure_class: that class.
        excerpt: the log lines that show the failure (may be empty).
        noticed_at: when the tuner noticed it (epoch seconds).
    """

    def __init__(self, reason: FailureClass | str, detail: str = "", excerpt: str = "") -> None:
        reason = str(reason)
        failure_class = FailureClass.of(reason)
        if failure_class is None:
            raise ValueError(f"{reason!r} is not a failure class: use a FailureClass")
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.noticed_at = time.time()
        self.reason = reason
        self.failure_class = failure_class
        self.detail = detail
        self.excerpt = excerpt
