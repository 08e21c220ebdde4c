"""Ctrl-C and SIGTERM: the tuner stops cleanly, at whatever moment and however often pressed.

Two rules:

- :func:`stop_cleanly` (the CLI runs every command inside it): the first Ctrl-C or SIGTERM (a
  process manager, ``kill``, a CI timeout) raises KeyboardInterrupt, and the command stops its
  server, reverts its patches and releases the host on its way out. An impatient user's further
  interrupts only say that the clean-up goes on; the ``presses_to_abandon``-th abandons it
  (:class:`CleanUpAbandoned`; what is left is stopped and reverted by the next run on the host).
- :func:`interrupts_held` around a start or a stop on the host: an interrupt that lands in the
  middle waits until it returned, then goes on. Cut short, a start over SSH could spawn the
  server unseen (the host's start script goes on), and a stop could leave it running.

SIGTERM always works. SIGINT inherited as ignored stays ignored: a tuner started as a background
job (``nohup tuner optimize ... &``, a non-interactive shell's ``&``, many CI runners) was asked by
its starter not to take interrupts, and a Ctrl-C meant for the terminal's foreground job must not
stop it; ``kill`` (SIGTERM) stops it cleanly all the same.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import TextIO

__all__ = [
    "INTERRUPT_SIGNALS",
    "PRESSES_TO_ABANDON",
    "CleanUpAbandoned",
    "Interrupts",
    "interrupts_held",
    "stop_cleanly",
]

INTERRUPT_SIGNALS = (signal.SIGINT, signal.SIGTERM)
PRESSES_TO_ABANDON = 4


class CleanUpAbandoned(KeyboardInterrupt):
    """The interrupt that abandons the clean-up: it goes through every hold at once."""


@dataclass
class Interrupts:
    """What :func:`stop_cleanly` saw: how many interrupts, and whether the clean-up was abandoned."""

    pressed: int = 0
    abandoned: bool = False


def _python_handlers() -> dict[int, Callable[[int, FrameType | None], object]]:
    """The interrupt signals with a Python handler in this thread (none outside the main thread;
    an ignored or default-action signal keeps its meaning), and those handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    handlers = {signum: signal.getsignal(signum) for signum in INTERRUPT_SIGNALS}
    return {signum: h for signum, h in handlers.items() if callable(h)}


def _signals_to_handle() -> list[signal.Signals]:
    """The interrupt signals :func:`stop_cleanly` takes over (none outside the main thread):
    SIGTERM always, even inherited as ignored; SIGINT unless inherited as ignored (``nohup
    cmd &``: the starter's choice) or handled outside Python."""
    if threading.current_thread() is not threading.main_thread():
        return []
    sigint = signal.getsignal(signal.SIGINT)
    return [signal.SIGTERM] + ([] if sigint in (signal.SIG_IGN, None) else [signal.SIGINT])


def _say(out: TextIO | None, line: str) -> None:
    print(line, file=out or sys.stderr, flush=True)


@contextmanager
def _handlers(
    signums: Sequence[int], handler: Callable[[int, FrameType | None], None]
) -> Iterator[None]:
    previous = {signum: signal.signal(signum, handler) for signum in signums}
    try:
        yield
    finally:
        for signum, before in previous.items():
            signal.signal(signum, before)


@contextmanager
def stop_cleanly(
    presses_to_abandon: int = PRESSES_TO_ABANDON, out: TextIO | None = None
) -> Iterator[Interrupts]:
    """Run the block with SIGINT and SIGTERM raising KeyboardInterrupt the first time; later ones
    are counted (the clean-up goes on) until the ``presses_to_abandon``-th abandons it. A SIGINT
    inherited as ignored stays ignored; SIGTERM is taken over whatever it was."""
    seen = Interrupts()
    signums = _signals_to_handle()

    def on_interrupt(signum: int, frame: FrameType | None) -> None:
        seen.pressed += 1
        left = presses_to_abandon - seen.pressed
        if seen.pressed == 1:
            _say(
                out,
                f"tuner: stopping cleanly (interrupt {left} more times to abandon the clean-up)",
            )
            raise KeyboardInterrupt(f"signal {signum}")
        if left > 0:
            _say(
                out, f"tuner: still stopping cleanly; interrupt {left} more time(s) to abandon it"
            )
            return
        seen.abandoned = True
        _say(
            out,
            "tuner: clean-up abandoned: a server or a patch may be left on the host; "
            "the next `tuner optimize` there stops and reverts them",
        )
        raise CleanUpAbandoned(f"signal {signum}")

    with _handlers(signums, on_interrupt):
        yield seen


@contextmanager
def interrupts_held(
    what: str, *, abandon: Callable[[], None] | None = None, out: TextIO | None = None
) -> Iterator[None]:
    """Run the block with interrupts held: each goes to the handler in place (which counts it),
    and a KeyboardInterrupt that handler raises is raised after the block, whatever the block did.

    Args:
        what: the held operation, for the one-line notice (``"the start of 'python3'"``).
        abandon: called when the clean-up is abandoned (:class:`CleanUpAbandoned`, which goes
            through at once) to cut the operation short: an SSH host closes its connection,
            where fabric would otherwise wait for the command to end.
        out: where the notice goes (standard error by default).
    """
    previous = _python_handlers()
    pending: list[KeyboardInterrupt] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        try:
            previous[signum](signum, frame)
        except CleanUpAbandoned:
            if abandon is not None:
                abandon()
            raise
        except KeyboardInterrupt as interrupt:
            if not pending:
                _say(out, f"tuner: interrupt held until {what} returns")
            pending.append(interrupt)

    try:
        with _handlers(list(previous), hold):
            yield
    except KeyboardInterrupt:
        raise
    except BaseException:
        if pending:
            raise pending[0]  # the interrupt wins; the block's error is its context
        raise
    if pending:
        raise pending[0]
