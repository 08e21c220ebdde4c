"""What the emulated engine reports of each batch, as SGLang's scheduler does: the ``Prefill
batch`` and ``Decode batch`` log lines (a decode line every ``--decode-log-interval`` steps) and,
with ``--enable-metrics``, its gauges, set with each batch's stats whatever the log level.

:class:`~tuner.emulator.scheduler.Scheduler` paces the batches and calls :class:`BatchLog` once
per batch it ran.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tuner.emulator.batch_core import Action, BatchCore
from tuner.emulator.metrics import SchedulerMetrics
from tuner.emulator.sglang_log import SglangLog

__all__ = ["BatchLog"]


class BatchLog:
    """The batch lines and gauges of one engine.

    Args:
        log: where the Prefill/Decode batch lines go.
        decode_log_interval: a ``Decode batch`` line every this many decode steps.
        cuda_graph: what the decode lines say about CUDA graphs.
        speculation: the ``accept len: ..., accept rate: ..., `` fields of a speculative
            engine's decode lines (empty without speculation).
        metrics: SGLang's scheduler gauges (``--enable-metrics``), set with each batch's stats
            as SGLang sets them, whatever the log level.
    """

    def __init__(
        self,
        log: SglangLog,
        decode_log_interval: int,
        cuda_graph: Callable[[int], bool],
        speculation: str = "",
        metrics: SchedulerMetrics | None = None,
    ) -> None:
        self.log = log
        self.decode_log_interval = max(1, decode_log_interval)
        self.cuda_graph = cuda_graph
        self.speculation = speculation
        self.metrics = metrics
        self._last_log = (time.monotonic(), 0)  # (when, output tokens) of the last decode line

    def prefill(self, core: BatchCore, action: Action) -> None:
        """A prefill batch ran (``core`` as it left it)."""
        cached = sum(r.cached_len for r in action.batch)
        if self.metrics is not None:
            total = action.tokens + cached
            self.metrics.batch_stats(
                len(core.running) - len(action.batch),
                len(core.waiting),
                core.kv_used,
                float(_usage(core)),
                cache_hit_rate=cached / total if total else 0.0,
            )
        self.log.tp(
            f"Prefill batch, #new-seq: {len(action.batch)}, #new-token: {action.tokens}, "
            f"#cached-token: {cached}, token usage: {_usage(core)}, "
            f"#running-req: {len(core.running) - len(action.batch)}, "
            f"#queue-req: {len(core.waiting)}, "
        )

    def decode(self, core: BatchCore, batch: int, tokens_out: int) -> None:
        """A decode step of ``batch`` requests ran; ``tokens_out``: output tokens since start."""
        if self.metrics is not None:
            self.metrics.decode_pass(self.cuda_graph(batch))
        if core.steps % self.decode_log_interval == 0:
            self._decode_line(core, batch, tokens_out)

    def _decode_line(self, core: BatchCore, batch: int, tokens_out: int) -> None:
        now = time.monotonic()
        then, before = self._last_log
        rate = (tokens_out - before) / max(now - then, 1e-9)
        self._last_log = (now, tokens_out)
        if self.metrics is not None:
            self.metrics.batch_stats(
                batch, len(core.waiting), core.kv_used, float(_usage(core)), gen_throughput=rate
            )
        self.log.tp(
            f"Decode batch, #running-req: {batch}, #token: {core.kv_used}, "
            f"token usage: {_usage(core)}, {self.speculation}"
            f"cuda graph: {self.cuda_graph(batch)}, "
            f"gen throughput (token/s): {rate:.2f}, #queue-req: {len(core.waiting)}, "
        )


def _usage(core: BatchCore) -> str:
    return f"{core.kv_used / max(1, core.timing.kv_tokens):.2f}"
