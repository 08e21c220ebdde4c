"""The batch core: admission by cap and KV pool, streaming notices, retraction, failures."""

from __future__ import annotations

from tuner.emulator.batch_core import BatchCore, CoreRequest, CoreTiming


def timing(**overrides: object) -> CoreTiming:
    values: dict[str, object] = {
        "decode_step": lambda batch: 0.01, "prefill": lambda tokens, chunks: 0.1 * chunks,
        "wakeup_s": 1.0, "gather_s": 0.2, "kv_tokens": 10_000, "max_running": 100,
        "chunk_tokens": 1000,
    }
    values.update(overrides)
    return CoreTiming(**values)  # type: ignore[arg-type]


def run_until_idle(core: BatchCore, now: float = 0.0) -> tuple[list[tuple[int, int]], float]:
    """Apply actions until nothing is left; ``[(rid, generated)]`` of every notice."""
    notices = []
    while (action := core.plan(now)) is not None:
        now += action.duration
        notices += [(p.request.rid, p.generated) for p in core.apply(action, now)]
    return notices, now


def test_admission_stops_at_the_cap_and_at_the_kv_pool() -> None:
    core = BatchCore(timing(max_running=3))
    for rid in range(5):
        core.submit(CoreRequest(rid, 100, 100))
    assert core.plan(0.0).kind == "wakeup"
    core.apply(core.plan(0.0))
    prefill = core.plan(0.0)
    assert prefill.kind == "prefill" and [r.rid for r in prefill.batch] == [0, 1, 2]

    core = BatchCore(timing(kv_tokens=500))  # each request reserves 100 + 100 tokens
    for rid in range(4):
        core.submit(CoreRequest(rid, 100, 100))
    core.apply(core.plan(0.0))
    assert [r.rid for r in core.plan(0.0).batch] == [0, 1]


def test_a_prefill_batch_takes_at_most_the_chunk_budget() -> None:
    core = BatchCore(timing(chunk_tokens=250))
    for rid in range(4):
        core.submit(CoreRequest(rid, 100, 10))
    core.apply(core.plan(0.0))
    assert [r.rid for r in core.plan(0.0).batch] == [0, 1]


def test_progress_is_reported_every_stream_interval_and_at_the_end() -> None:
    core = BatchCore(timing(), notify_every=4)
    core.submit(CoreRequest(7, 10, 10))
    notices, _ = run_until_idle(core)
    assert notices == [(7, 1), (7, 4), (7, 8), (7, 10)]
    assert core.kv_used == 0 and not core.busy


def test_idle_wakeup_counts_from_when_the_scheduler_went_idle() -> None:
    core = BatchCore(timing(wakeup_s=1.0, gather_s=0.2))
    core.submit(CoreRequest(0, 10, 2))
    first = core.plan(0.0)
    assert first.kind == "wakeup" and first.duration == 0.2  # never busy before: gather only
    _, finished_at = run_until_idle(core, 0.0)
    core.submit(CoreRequest(1, 10, 2))
    assert core.plan(finished_at + 0.3).duration == 0.7  # 1.0 after going idle, 0.3 gone


def test_with_less_than_the_whole_output_reserved_the_newest_are_retracted() -> None:
    core = BatchCore(timing(kv_tokens=800, reserve_ratio=0.5), notify_every=100)
    for rid in range(3):  # 3 x (100 + 200 x 0.5) = 600 reserved, 3 x 300 needed in the end
        core.submit(CoreRequest(rid, 100, 200))
    notices, _ = run_until_idle(core)
    assert sorted(rid for rid, generated in notices if generated == 200) == [0, 1, 2]
    assert core.kv_used == 0 and not core.waiting
    assert max(generated for _, generated in notices) == 200


def test_retraction_is_counted_on_the_request() -> None:
    core = BatchCore(timing(kv_tokens=800, reserve_ratio=0.5), notify_every=1000)
    requests = [CoreRequest(rid, 100, 200) for rid in range(3)]
    for request in requests:
        core.submit(request)
    run_until_idle(core)
    assert requests[-1].retractions >= 1 and requests[0].retractions == 0


def test_crash_and_out_of_memory_actions_at_their_thresholds() -> None:
    core = BatchCore(timing(crash_batch=3))
    for rid in range(3):
        core.submit(CoreRequest(rid, 10, 10))
    core.apply(core.plan(0.0))
    assert core.plan(0.0).kind == "crash"

    core = BatchCore(timing(oom_batch=2))
    for rid in range(2):
        core.submit(CoreRequest(rid, 10, 10))
    core.apply(core.plan(0.0))
    core.apply(core.plan(0.0))  # prefill
    assert core.plan(0.0).kind == "oom"


def test_cancel_frees_the_kv_tokens_of_a_running_request() -> None:
    core = BatchCore(timing())
    request = CoreRequest(0, 100, 50)
    core.submit(request)
    core.apply(core.plan(0.0))
    core.apply(core.plan(0.0))
    assert core.kv_used == 101
    core.cancel(request)
    assert core.kv_used == 0 and not core.busy


def _decode_until_failure(core: BatchCore, limit_s: float) -> tuple[str, float]:
    """Run until an OOM or ``limit_s`` of schedule: (last action kind, schedule time)."""
    now = 0.0
    while now < limit_s and (action := core.plan(now)) is not None:
        if action.kind == "oom":
            return "oom", now
        now += action.duration
        core.apply(action, now)
    return "ok", now


def test_a_slow_leak_fails_only_after_sustained_decode_at_a_large_batch() -> None:
    leaky = timing(leak_batch=8, leak_after_s=5.0, kv_tokens=1_000_000)
    core = BatchCore(leaky)
    for rid in range(8):  # at the leaking batch size: out of memory after 5 s of decode
        core.submit(CoreRequest(rid, 10, 10_000))
    kind, when = _decode_until_failure(core, 60.0)
    assert kind == "oom" and 5.0 <= when < 7.0

    core = BatchCore(leaky)
    for rid in range(7):  # one request fewer: no leak, however long it runs
        core.submit(CoreRequest(rid, 10, 10_000))
    assert _decode_until_failure(core, 60.0)[0] == "ok"
