"""A test server run as a child process in its own process group, started with ``--port 0`` and
read from its ``PORT <n>`` line; a context manager that always stops it (SIGTERM to the group,
SIGKILL after 5 s). The pacing server and the strict OpenAI stand-in are two of these."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Self

__all__ = ["ChildServer", "option_args"]


def option_args(options: dict[str, Any]) -> list[str]:
    """Keyword options as a command line: ``ttft_ms=300`` -> ``--ttft-ms 300``, ``True`` -> the
    bare flag, ``None``/``False`` -> nothing."""
    args: list[str] = []
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is not None and value is not False:
            args += [flag, str(value)]
    return args


class ChildServer:
    """``python SCRIPT --port 0 ARGS`` in a process group of its own.

    Args:
        script: the server's file.
        args: its command-line arguments.
        name: what to call it in an error.
    """

    def __init__(self, script: Path, args: list[str], name: str) -> None:
        self.script = script
        self.args = args
        self.name = name
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self, timeout_s: float = 20.0) -> Self:
        """Start the server and wait until it says which port it listens on."""
        self.process = subprocess.Popen(
            [sys.executable, str(self.script), "--port", "0", *self.args],
            stdout=subprocess.PIPE, text=True, start_new_session=True,
        )
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], deadline - time.monotonic())
            line = self.process.stdout.readline() if ready else ""
            if line.startswith("PORT "):
                self.url = f"http://127.0.0.1:{int(line.split()[1])}"
                return self
            if not line:
                break
        self.stop()
        raise RuntimeError(f"{self.name} did not start: {self.args}")

    def stop(self) -> None:
        """Stop the server's process group and reap it; safe to call twice."""
        if self.process is None:
            return
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
