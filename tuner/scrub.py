"""Secret values taken out of what the tuner stores: log lines, messages, trial attributes.

A server prints its arguments at start (SGLang: ``server_args=ServerArgs(... api_key='...')``),
and a failure message may quote a log line. The tuner knows the secrets of a launch
(:meth:`tuner.space.LaunchSpec.secret_values`); a :class:`Scrubber` replaces each of them by
``***`` wherever it appears, before a line is kept in memory, copied to ``studies/runs/`` or
stored on a trial (:func:`tuner.study.record.scrubbing`).

Values too short or too plain to be a secret are left alone (scrubbing ``1`` or ``false``, the
value of ``TOKENIZERS_PARALLELISM``, would garble every log line): fewer than
:data:`MIN_SECRET_CHARS` characters, a number, or a boolean word.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MASK", "MIN_SECRET_CHARS", "Scrubber"]

MASK = "***"
MIN_SECRET_CHARS = 4
_PLAIN = re.compile(r"[-+]?[0-9._]*|true|false|null|none|yes|no|on|off", re.IGNORECASE)


def _worth_hiding(value: str) -> bool:
    return len(value) >= MIN_SECRET_CHARS and not _PLAIN.fullmatch(value)


@dataclass(frozen=True)
class Scrubber:
    """Replaces known secret values by ``***``.

    Args:
        secrets: the values to hide; short or plain ones (see the module docstring) are ignored.
    """

    secrets: tuple[str, ...] = ()
    _pattern: re.Pattern[str] | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        hidden = sorted({s for s in self.secrets if _worth_hiding(s)}, key=len, reverse=True)
        object.__setattr__(self, "secrets", tuple(hidden))
        pattern = re.compile("|".join(re.escape(s) for s in hidden)) if hidden else None
        object.__setattr__(self, "_pattern", pattern)

    @classmethod
    def of(cls, values: Iterable[str]) -> Scrubber:
        """A scrubber of ``values``."""
        return cls(tuple(values))

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, text: str) -> str:
        """``text`` with every secret value replaced by ``***``."""
        return self._pattern.sub(MASK, text) if self._pattern is not None and text else text

    def value(self, value: Any) -> Any:
        """A JSON-like value (strings, lists, dicts) with every string scrubbed, keys too."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.value(item) for item in value)
        return value

    def file(self, source: str, target: str) -> None:
        """Copy the text file ``source`` to ``target`` line by line, scrubbed: written to a new
        file created 0600 beside it, then moved over ``target``."""
        import os
        import tempfile

        descriptor, temporary = tempfile.mkstemp(
            prefix=".scrubbed-", dir=os.path.dirname(os.path.abspath(target))
        )
        try:
            with (
                open(descriptor, "w", encoding="utf-8", errors="replace", newline="") as out,
                open(source, encoding="utf-8", errors="replace", newline="") as stream,
            ):
                for line in stream:
                    out.write(self.text(line))
            os.replace(temporary, target)
        except BaseException:
            os.unlink(temporary)
            raise
