"""What the server's log said during a trial: the engine profile's patterns, matched line by line.

The engine profile names the log patterns (``log_observations`` in ``tuner/engines/*.yaml``:
data, not code): each maps a series name to a regular expression whose first group is a
number. :class:`LogObserver` collects every match, by the session's phase; the figures of a
level are made of them by :func:`tuner.signals._series.level_figures`. A server started with a
log level that hides its batch lines (SGLang's ``--log-level warning``) gives none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from tuner.signals._series import Series

__all__ = ["LogObserver"]


class LogObserver(Series):
    """Collects the numbers the profile's patterns find in the server log, by phase."""

    def __init__(self, patterns: Mapping[str, str]) -> None:
        super().__init__(patterns)
        self._patterns = {name: re.compile(pattern) for name, pattern in patterns.items()}

    def feed(self, line: str, phase: str) -> None:
        """Read one log line written during ``phase``."""
        for name, pattern in self._patterns.items():
            match = pattern.search(line)
            if match is None:
                continue
            try:
                value = float(match.group(1).replace(",", ""))  # "12,345" as vLLM writes it
            except (IndexError, ValueError):
                continue
            self.add(phase, name, value)
