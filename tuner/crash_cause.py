"""The error that made a server crash, read from the log lines after its generic fatal line.

SGLang reports a crash as ``Scheduler hit an exception: Traceback (most recent call last):``,
then the frames, then the exception itself (``AttributeError: 'PrefillMetadata' object has no
attribute 'topk_indices'``). A trial's detail names that last line, the cause, rather than the
generic first one.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["crash_cause"]

# ``AttributeError: ...``, ``torch.OutOfMemoryError: ...``, ``SystemExit``: not indented.
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Fault)(?::\s.*)?$")
_IN_LINE = re.compile(r":\s((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)(?::\s.*)?)$")
_TRACEBACK_PARTS = (
    "Traceback (most recent call last)",
    "During handling of the above",
    "The above exception was the direct cause",
)


def crash_cause(fatal_line: str, after: Sequence[str]) -> str | None:
    """The exception line that ends the traceback following ``fatal_line``, or one that the
    fatal line itself ends with (``...hit an exception: ValueError: boom``); None if neither.

    Args:
        fatal_line: the log line that matched a crash signature.
        after: the log lines that followed it.
    """
    cause = None
    in_traceback = "Traceback" in fatal_line
    for line in after:
        text = line.rstrip()
        if text.startswith(_TRACEBACK_PARTS):
            in_traceback = True
        elif _EXCEPTION.match(text) and (in_traceback or cause is None):
            cause = text  # a chained traceback's last exception wins
            in_traceback = False
        elif text and not text[0].isspace() and cause is not None:
            break  # the next log record: the traceback is over
    if cause is not None:
        return cause
    found = _IN_LINE.search(fatal_line.rstrip())
    return found.group(1) if found else None
