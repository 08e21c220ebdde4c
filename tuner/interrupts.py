"""Ctrl-C and SIGTERM: both stop the tuner the same clean way; both wait for a start to return.

:func:`terminate_like_ctrl_c` makes SIGTERM (a process manager, ``kill``, a CI timeout) raise
KeyboardInterrupt like Ctrl-C, so every command stops its server and reverts its patches on it.

An interrupt that lands while a start command is on its way to the host (over SSH, the remote
start script may spawn the server a few seconds later) leaves the tuner without the handle of what
it started. :func:`interrupts_held` makes the first interrupt wait until the start command has
returned; the caller then holds the handle and stops what it started before the interrupt goes on.
A second interrupt abandons the wait at once (for a host that no longer answers).
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TextIO

__all__ = ["HELD_SIGNALS", "interrupts_held", "raise_keyboard_interrupt", "terminate_like_ctrl_c"]

HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def interrupts_held(
    what: str, abandon: Callable[[], None] | None = None, out: TextIO | None = None
) -> Iterator[None]:
    """Run the block with SIGINT and SIGTERM held; after it, deliver the first one that came.

    Args:
        what: the held operation, for the one-line notice (``"the server's start"``).
        abandon: called on a second interrupt, before it is raised, to cut the operation short
            (an SSH host closes its connection: fabric would otherwise wait for the command).
        out: where the notice goes (standard error by default).

    Only the main thread can hold signals; elsewhere the block runs as it is. A signal the process
    ignores stays ignored. The held signal is raised again once the previous handlers are back,
    so it has its usual effect (the tuner's handlers raise KeyboardInterrupt).
    """
    held = [s for s in HELD_SIGNALS if signal.getsignal(s) not in (signal.SIG_IGN, None)]
    if threading.current_thread() is not threading.main_thread() or not held:
        yield
        return
    received: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        if received:
            if abandon is not None:
                abandon()
            raise KeyboardInterrupt(f"signal {signum}, again while {what} was held")
        received.append(signum)
        print(
            f"tuner: interrupt held until {what} returns, then it is stopped; "
            "interrupt again to abandon it",
            file=out or sys.stderr,
            flush=True,
        )

    previous = {signum: signal.signal(signum, hold) for signum in held}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if received:  # delivered again, to the handler it was meant for, whatever the block did
            signal.raise_signal(received[0])


def raise_keyboard_interrupt(signum: int, frame: FrameType | None) -> None:
    """A signal handler: the signal stops the tuner like Ctrl-C."""
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def terminate_like_ctrl_c() -> Iterator[None]:
    """Run the block with SIGTERM raising KeyboardInterrupt (main thread only; a SIGTERM the
    process ignores stays ignored); the previous handler is back afterwards."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(
        signal.SIGTERM
    ) in (signal.SIG_IGN, None):
        yield
        return
    previous = signal.signal(signal.SIGTERM, raise_keyboard_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
