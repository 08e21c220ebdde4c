"""``tuner bench`` run as a user runs it: a subprocess through the project's own entry point."""

from __future__ import annotations

import subprocess
import sys

# The project's own entry point (``tuner`` on the command line), with ``bench`` as first argument.
RUN_TUNER = "import sys; from tuner.cli import main; sys.argv[0] = 'tuner'; main()"


def tuner_bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN_TUNER, "bench", *args],
        capture_output=True,
        check=False,
        text=True,
        timeout=120,
    )

