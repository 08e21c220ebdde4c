"""Ctrl-C as a test needs it, whatever the test run itself inherited.

A process started as a background job (``cmd &`` in a non-interactive shell, ``nohup cmd &``, many
CI runners and process managers) starts with SIGINT ignored, and a child inherits that through
``exec``. Python then installs no KeyboardInterrupt handler, and the tuner (rightly) leaves an
ignored SIGINT ignored. So a test that presses Ctrl-C sets the disposition it needs:

- :func:`sigint_default` prefixes a child's command line: the child starts with SIGINT at its
  default action (a Python child then raises KeyboardInterrupt), as from a terminal;
- :func:`sigint_raises` makes SIGINT raise KeyboardInterrupt in this process for a block;
- :func:`ignores` reads a live process's ignored signals, to check what a child really has.

Run as a script (``python signals.py default|ignore CMD ARGS...``), this file sets SIGINT and
execs CMD: the same process, the same PID, so a test can signal and wait for it as usual.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = ["ignores", "sigint_default", "sigint_raises"]

_DISPOSITIONS = {"default": signal.SIG_DFL, "ignore": signal.SIG_IGN}


def sigint_default(argv: Sequence[str]) -> list[str]:
    """``argv`` run with SIGINT at its default action and unblocked (same PID)."""
    return [sys.executable, str(Path(__file__).resolve()), "default", *argv]


@contextmanager
def sigint_raises() -> Iterator[None]:
    """Within the block SIGINT raises KeyboardInterrupt in this process (Python's own handler,
    the one a terminal's Ctrl-C meets); the disposition before is restored after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    blocked = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        signal.signal(signal.SIGINT, before if before is not None else signal.SIG_DFL)


def ignores(pid: int, signum: int) -> bool:
    """True if the live process ``pid`` ignores ``signum`` (its ``SigIgn`` mask in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    raise AssertionError(f"/proc/{pid}/status has no SigIgn line")


def _exec(disposition: str, argv: list[str]) -> None:
    signal.signal(signal.SIGINT, _DISPOSITIONS[disposition])
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    _exec(sys.argv[1], sys.argv[2:])
