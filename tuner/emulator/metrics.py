"""``/metrics`` of the emulated server, in SGLang 0.5.9's names and format (``--enable-metrics``).

SGLang's scheduler sets its gauges (``sglang/srt/metrics/collector.py``,
``SchedulerMetricsCollector``) from the same figures it logs, at the same moments
(``scheduler_metrics_mixin.py``): with each ``Prefill batch`` (the running batch without the new
one, the queue, the KV pool's use, the prefix-cache hit rate of that batch) and each ``Decode
batch`` stats line (every ``--decode-log-interval`` steps; the hit rate 0.0, as 0.5.9 sets it),
whatever the log level, so ``--log-level warning`` hides the lines and not the gauges. It counts
every decode pass by whether it ran in a CUDA graph (``sglang:cuda_graph_passes_total``, ``mode``
``decode_cuda_graph`` or ``decode_none``). The emulator does the same from its batch core and
serves them with ``prometheus_client``, the library SGLang uses, with SGLang's labels
(``model_name``, ``engine_type``, ``tp_rank``, ``pp_rank``, ``moe_ep_rank``). The figures are the
emulator's own model of the host (emulated, not measured).

:meth:`SchedulerMetrics.register_extra` adds a gauge read when scraped (e.g.
``sglang:spec_accept_length`` once the emulator models speculative decoding).
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

__all__ = ["SchedulerMetrics", "CONTENT_TYPE"]

CONTENT_TYPE = (
    "text/plain; version=0.0.4; charset=utf-8"  # prometheus_client's CONTENT_TYPE_LATEST
)


class SchedulerMetrics:
    """The scheduler's gauges and counters as SGLang 0.5.9 names them, in a registry of its own.

    Args:
        model_name: ``--served-model-name`` (else the model path), the ``model_name`` label.
        max_total_num_tokens: the KV pool's size in tokens.
    """

    def __init__(self, model_name: str, max_total_num_tokens: int) -> None:
        self.registry = CollectorRegistry()
        self.labels = {
            "model_name": model_name,
            "engine_type": "unified",
            "tp_rank": "0",
            "pp_rank": "0",
            "moe_ep_rank": "0",
        }
        self._gauges: dict[str, Gauge] = {}
        for name, documentation in (
            ("num_running_reqs", "The number of running requests."),
            ("num_used_tokens", "The number of used tokens."),
            ("token_usage", "The token usage."),
            ("gen_throughput", "The generation throughput (token/s)."),
            ("num_queue_reqs", "The number of requests in the waiting queue."),
            ("cache_hit_rate", "The prefix cache hit rate."),
            ("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."),
        ):
            self._gauges[name] = Gauge(
                f"sglang:{name}", documentation, list(self.labels), registry=self.registry
            )
        self._gauges["max_total_num_tokens"].labels(**self.labels).set(max_total_num_tokens)
        self._passes = Counter(
            "sglang:cuda_graph_passes",
            "Total number of forward passes categorized by CUDA graph.",
            [*self.labels, "mode"],
            registry=self.registry,
        )

    def batch_stats(
        self,
        running: int,
        queued: int,
        used_tokens: int,
        token_usage: float,
        cache_hit_rate: float = 0.0,
        gen_throughput: float | None = None,
    ) -> None:
        """What one Prefill or Decode batch's stats set (SGLang's ``log_stats`` of them)."""
        values = {
            "num_running_reqs": running,
            "num_queue_reqs": queued,
            "num_used_tokens": used_tokens,
            "token_usage": token_usage,
            "cache_hit_rate": cache_hit_rate,
        }
        if gen_throughput is not None:
            values["gen_throughput"] = gen_throughput
        for name, value in values.items():
            self._gauges[name].labels(**self.labels).set(value)

    def decode_pass(self, cuda_graph: bool) -> None:
        """One decode step, in a CUDA graph or not (SGLang's ``increment_cuda_graph_pass``)."""
        mode = "decode_cuda_graph" if cuda_graph else "decode_none"
        self._passes.labels(**self.labels, mode=mode).inc()

    def register_extra(self, name: str, documentation: str, read: Callable[[], float]) -> None:
        """Serve one more gauge, ``name`` (SGLang's, e.g. ``sglang:spec_accept_length``), whose
        value ``read()`` gives at each scrape."""
        gauge = Gauge(name, documentation, list(self.labels), registry=self.registry)
        gauge.labels(**self.labels).set_function(read)

    def render(self) -> bytes:
        """The exposition text a scrape of ``/metrics`` answers."""
        return generate_latest(self.registry)
