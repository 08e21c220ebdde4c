"""SGLang-like log lines and tracebacks, written line by line and flushed at once.

The tuner reads the emulated server's log exactly as it reads SGLang's (``sglang.md`` §3): the
same progress lines, the same crash signatures, the same tracebacks in shape. Paths in
tracebacks point into the ``sglang`` package the server read (the stand-in).

``--log-level`` is honoured as SGLang's loggers honour it: a line below the level is not
written. SGLang writes its start-up, batch (``Prefill batch``, ``Decode batch``) and ready lines at
INFO (``logger.info`` in ``scheduler_metrics_mixin.py``, ``http_server.py``), so ``--log-level
warning`` leaves only warnings, errors and tracebacks; uvicorn's lines follow the same level.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import TextIO

__all__ = ["SIGQUIT_LINE", "SglangLog"]

SIGQUIT_LINE = "SIGQUIT received. signum=None, frame=None. It usually means one child failed."

_REFUSAL_FRAMES = (
    ("launch_server.py", 32, "<module>", "server_args = prepare_server_args(sys.argv[1:])"),
    (
        "srt/server_args.py",
        5593,
        "prepare_server_args",
        "return ServerArgs.from_cli_args(raw_args)",
    ),
    (
        "srt/server_args.py",
        5078,
        "from_cli_args",
        "return cls(**{attr: getattr(args, attr) for attr in attrs})",
    ),
    ("srt/server_args.py", 640, "__post_init__", "self._handle_model_specific_adjustments()"),
)
_SCHEDULER_FRAMES = {
    "crash": (
        (
            "srt/managers/scheduler.py",
            2934,
            "run_scheduler_process",
            "scheduler.event_loop_normal()",
        ),
        ("srt/managers/scheduler.py", 1088, "event_loop_normal", "result = self.run_batch(batch)"),
        (
            "srt/model_executor/model_runner.py",
            2291,
            "forward_extend",
            "return self.model.forward(",
        ),
        (
            "srt/layers/attention/nsa_backend.py",
            812,
            "forward_extend",
            "topk_indices = forward_batch.attn_backend.forward_metadata.topk_indices",
        ),
    ),
    "oom": (
        (
            "srt/managers/scheduler.py",
            2934,
            "run_scheduler_process",
            "scheduler.event_loop_overlap()",
        ),
        (
            "srt/managers/scheduler.py",
            1140,
            "event_loop_overlap",
            "batch_result = self.run_batch(batch)",
        ),
        (
            "srt/model_executor/model_runner.py",
            2245,
            "forward_decode",
            "return self.model.forward(",
        ),
        (
            "srt/layers/moe/fused_moe_triton/layer.py",
            1021,
            "forward",
            "workspace = torch.empty(shape, dtype=dtype, device=device)",
        ),
    ),
    "startup": (
        (
            "srt/managers/scheduler.py",
            2921,
            "run_scheduler_process",
            "scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, moe_ep_rank, ...)",
        ),
        ("srt/model_executor/model_runner.py", 412, "initialize", "self.init_device_graphs()"),
    ),
}


class SglangLog:
    """Writes SGLang-shaped lines to a stream (stdout by default), flushing each one.

    Args:
        package_dir: the ``sglang`` package whose files tracebacks name.
        stream: where the lines go.
        level: SGLang's ``--log-level`` (``debug``, ``info``, ``warning``, ``error``, ...): lines
            below it are not written.
    """

    def __init__(
        self, package_dir: Path, stream: TextIO | None = None, level: str = "info"
    ) -> None:
        self.package_dir = package_dir
        self.stream = stream or sys.stdout
        threshold = logging.getLevelName(level.upper())
        self.threshold = threshold if isinstance(threshold, int) else logging.INFO

    def shows(self, level: int) -> bool:
        """Whether a line of ``level`` is written at this log level."""
        return level >= self.threshold

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text if text.endswith("\n") else text + "\n")
            self.stream.flush()
        except (BrokenPipeError, ValueError):
            pass  # nobody reads the log any more

    @staticmethod
    def _stamp() -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S")

    def main(self, message: str, level: int = logging.INFO) -> None:
        """A line of the main (HTTP) process."""
        if self.shows(level):
            self._write(f"[{self._stamp()}] {message}")

    def tp(self, message: str, rank: int = 0, level: int = logging.INFO) -> None:
        """A line of the scheduler of tensor-parallel rank ``rank``."""
        if self.shows(level):
            self._write(f"[{self._stamp()} TP{rank}] {message}")

    def raw(self, text: str, level: int | None = None) -> None:
        """Lines printed without a prefix (tracebacks and progress bars always; uvicorn's at its
        ``level``)."""
        if level is None or self.shows(level):
            self._write(text)

    def _frames(self, frames: tuple[tuple[str, int, str, str], ...]) -> str:
        lines = ["Traceback (most recent call last):"]
        for relative, line, function, code in frames:
            lines.append(f'  File "{self.package_dir / relative}", line {line}, in {function}')
            lines.append(f"    {code}")
        return "\n".join(lines)

    def refusal(self, error_line: str) -> None:
        """A start-up check failing in ``ServerArgs.__post_init__`` (main process)."""
        self.raw(f"{self._frames(_REFUSAL_FRAMES)}\n{error_line}")

    def scheduler_exception(self, kind: str, error_line: str) -> None:
        """``Scheduler hit an exception:`` with a traceback, then the parent's SIGQUIT line.

        Args:
            kind: ``crash`` (prefill), ``oom`` (decode) or ``startup``.
            error_line: the exception's last line.
        """
        self.tp(
            f"Scheduler hit an exception: {self._frames(_SCHEDULER_FRAMES[kind])}",
            level=logging.ERROR,
        )
        self.raw(error_line)
        self.raw("")
        self.main(SIGQUIT_LINE, level=logging.ERROR)

    def syntax_error(self, path: str, line: int, message: str, text: str) -> None:
        """A patched source file that no longer parses, as Python reports it on import."""
        self.tp(
            "Scheduler hit an exception: " + self._frames(_SCHEDULER_FRAMES["startup"][:1]),
            level=logging.ERROR,
        )
        self.raw(
            f'  File "{path}", line {line}\n    {text.strip()}\n    ^\nSyntaxError: {message}'
        )
        self.raw("")
        self.main(SIGQUIT_LINE, level=logging.ERROR)
