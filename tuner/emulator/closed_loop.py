"""One closed-loop load level in virtual time: what a benchmark client would measure.

:func:`simulate_level` drives a :class:`~tuner.emulator.batch_core.BatchCore` exactly as the
server does, with an ideal client: ``concurrency`` requests in flight, a finished request
replaced at once, until ``num_requests`` have finished. It returns the level's output tokens
per host second (all output tokens over the time from the first request to the last token),
as ``bench_serving`` computes ``output_throughput``.
"""

from __future__ import annotations

from tuner.emulator.batch_core import BatchCore, CoreRequest, CoreTiming

__all__ = ["simulate_level"]


def simulate_level(
    timing: CoreTiming,
    concurrency: int,
    num_requests: int,
    input_len: int,
    output_len: int,
) -> float | str:
    """Output tok/s of the level, or ``"crash"``/``"oom"`` when the engine fails under it.

    ``timing`` is the engine's (``EngineModel.timing(noise)``): this module knows only the
    scheduler, so the performance model depends on it and not the other way round.

    Raises:
        ValueError: a request cannot fit in the KV pool even alone.
    """
    if input_len + output_len > timing.kv_tokens:
        raise ValueError(
            f"a request of {input_len}+{output_len} tokens does not fit the KV pool of "
            f"{timing.kv_tokens} tokens"
        )
    core = BatchCore(timing, notify_every=output_len)
    sent = finished = 0
    while sent < min(concurrency, num_requests):
        core.submit(CoreRequest(sent, input_len, output_len))
        sent += 1
    elapsed = 0.0
    while finished < num_requests:
        action = core.plan(elapsed)
        if action is None:
            raise RuntimeError("the simulated scheduler stalled with requests left")
        if action.kind in ("crash", "oom"):
            return action.kind
        elapsed += action.duration
        for progress in core.apply(action, elapsed):
            if not progress.finished:
                continue
            finished += 1
            if sent < num_requests:
                core.submit(CoreRequest(sent, input_len, output_len))
                sent += 1
    return num_requests * output_len / elapsed
