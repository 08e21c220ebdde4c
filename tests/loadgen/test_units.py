"""Pure logic of the load generator: level specs, metrics records, prompts, aggregation."""

from __future__ import annotations

import json

import pytest

from tuner.errors import ConfigError
from tuner.loadgen import PROMPT_TOKEN_RANGE, LevelMetrics, LevelSpec, load_sharegpt, make_prompts
from tuner.loadgen._aggregate import aggregate
from tuner.loadgen._apis import RequestFailed, api_format
from tuner.loadgen._stream import COMPLETED, FAILED, RequestLog
from tuner.timescale import TimeScale


def spec(**changes: object) -> LevelSpec:
    values = {
        "concurrency": 4,
        "num_requests": 8,
        "input_len": 16,
        "output_len": 8,
        "time_limit_s": 10.0,
    }
    values.update(changes)
    return LevelSpec(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"concurrency": 0}, "concurrency"),
        ({"num_requests": -1}, "num_requests"),
        ({"output_len": 2.5}, "output_len"),
        ({"time_limit_s": 0}, "time_limit_s"),
        ({"request_rate": 0.0}, "request_rate"),
        ({"warmup": -3}, "warmup"),
        ({"max_error_fraction": 1.5}, "max_error_fraction"),
    ],
)
def test_level_spec_rejects_bad_values_naming_the_field(changes: dict, field: str) -> None:
    with pytest.raises(ConfigError, match=field) as caught:
        spec(**changes)
    assert "\n" not in str(caught.value)
    assert caught.value.exit_code == 2


def test_error_budget_is_a_fraction_of_the_requests() -> None:
    assert spec(num_requests=200, max_error_fraction=0.05).error_budget == 10
    assert spec(num_requests=10, max_error_fraction=0.05).error_budget == 0


def test_unknown_api_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="sglang, openai, openai-chat"):
        api_format("grpc")


def _log_with(events: list[tuple[float, list[float], list[int | None], int]]) -> RequestLog:
    """A log of completed requests: (start, event times, event counts, server total)."""
    log = RequestLog(len(events))
    for i, (start, times, counts, total) in enumerate(events):
        log.status[i] = COMPLETED
        log.start[i] = start
        log.event_times[i] = list(times)
        log.event_counts[i] = list(counts)
        log.end[i] = times[-1] + 0.001
        log.output_tokens[i] = total
        log.input_tokens[i] = 16
    return log


def test_aggregate_follows_bench_serving_definitions() -> None:
    # Request 0: first token after 0.3 s, then one token every 20 ms (5 tokens).
    # Request 1: first token after 0.5 s, then events of 2 tokens every 40 ms (5 tokens).
    log = _log_with(
        [
            (0.0, [0.3, 0.32, 0.34, 0.36, 0.38], [1, 2, 3, 4, 5], 5),
            (0.0, [0.5, 0.54, 0.58], [1, 3, 5], 5),
        ]
    )
    metrics = aggregate(
        log,
        concurrency=2,
        started=0.0,
        duration=1.0,
        scale=TimeScale(),
        stop_reason=None,
        errors=(),
    )
    assert metrics.completed == 2 and metrics.failed == 0
    assert metrics.output_tokens == 10 and metrics.input_tokens == 32
    assert metrics.output_throughput == pytest.approx(10.0)
    assert metrics.total_throughput == pytest.approx(42.0)
    assert metrics.mean_ttft_ms == pytest.approx(400.0)
    # ITL: an event of 2 tokens 40 ms after the last counts as two gaps of 20 ms.
    assert metrics.median_itl_ms == pytest.approx(20.0)
    assert metrics.p99_itl_ms == pytest.approx(20.0)
    # TPOT = (e2e - ttft) / (tokens - 1): (0.081 s) / 4 for both.
    assert metrics.mean_tpot_ms == pytest.approx(20.25)
    assert metrics.max_output_tokens_per_s == 10.0
    assert not metrics.emulated


def test_best_second_spreads_an_events_tokens_over_the_gap_before_it() -> None:
    # One token at 0.5 s, then an event of 4 tokens at 2.5 s: they count at 1.0, 1.5, 2.0, 2.5.
    log = _log_with([(0.0, [0.5, 2.5], [1, 5], 5)])
    metrics = aggregate(
        log,
        concurrency=1,
        started=0.0,
        duration=3.0,
        scale=TimeScale(),
        stop_reason=None,
        errors=(),
    )
    assert metrics.max_output_tokens_per_s == 2.0
    assert metrics.median_itl_ms == pytest.approx(500.0)


def test_aggregate_converts_through_the_time_scale() -> None:
    log = _log_with([(0.0, [0.03, 0.032, 0.034], [1, 2, 3], 3)])
    real = aggregate(
        log,
        concurrency=1,
        started=0.0,
        duration=0.1,
        scale=TimeScale(),
        stop_reason=None,
        errors=(),
    )
    emulated = aggregate(
        log,
        concurrency=1,
        started=0.0,
        duration=0.1,
        scale=TimeScale(10.0),
        stop_reason=None,
        errors=(),
    )
    assert emulated.emulated and emulated.time_scale == 10.0
    assert emulated.median_ttft_ms == pytest.approx(real.median_ttft_ms * 10)
    assert emulated.median_itl_ms == pytest.approx(real.median_itl_ms * 10)
    assert emulated.duration_s == pytest.approx(real.duration_s * 10)
    assert emulated.output_throughput == pytest.approx(real.output_throughput / 10)


def test_aggregate_spreads_events_without_counts_over_the_server_total() -> None:
    # 3 events of text, the server counted 6 tokens at the end: 2 tokens an event.
    log = _log_with([(0.0, [0.1, 0.14, 0.18], [None, None, None], 6)])
    metrics = aggregate(
        log,
        concurrency=1,
        started=0.0,
        duration=1.0,
        scale=TimeScale(),
        stop_reason=None,
        errors=(),
    )
    assert metrics.output_tokens == 6
    assert metrics.median_itl_ms == pytest.approx(20.0)


def test_failed_and_unsent_requests_are_not_measured() -> None:
    log = _log_with([(0.0, [0.1, 0.2], [1, 2], 2), (0.0, [0.1], [1], 1), (0.0, [0.1], [1], 1)])
    log.status[1] = FAILED
    log.status[2] = 0
    metrics = aggregate(
        log,
        concurrency=1,
        started=0.0,
        duration=1.0,
        scale=TimeScale(),
        stop_reason="stopped",
        errors=("boom",),
    )
    assert (metrics.completed, metrics.failed, metrics.output_tokens) == (1, 1, 2)
    assert metrics.failed_fraction == pytest.approx(1 / 3)
    assert not metrics.clean()


def test_no_completed_request_gives_no_latency() -> None:
    metrics = aggregate(
        RequestLog(4),
        concurrency=1,
        started=0.0,
        duration=0.0,
        scale=TimeScale(),
        stop_reason="server gone",
        errors=(),
    )
    assert metrics.median_ttft_ms is None and metrics.output_throughput == 0.0
    document = json.loads(json.dumps(metrics.to_dict()))
    assert document["median_ttft_ms"] is None


def test_metrics_round_trip_through_json() -> None:
    log = _log_with([(0.0, [0.3, 0.32], [1, 2], 2)])
    metrics = aggregate(
        log,
        concurrency=1,
        started=0.0,
        duration=1.0,
        scale=TimeScale(4.0),
        stop_reason=None,
        errors=("a", "b"),
    )
    document = json.loads(json.dumps(metrics.to_dict()))
    assert {
        "output_throughput",
        "median_ttft_ms",
        "median_tpot_ms",
        "p99_itl_ms",
        "max_output_tokens_per_s",
        "emulated",
        "stop_reason",
    } <= set(document)
    assert LevelMetrics.from_dict(document) == metrics
    assert metrics.clean()
    with pytest.raises(ValueError, match="completed"):
        LevelMetrics.from_dict({k: v for k, v in document.items() if k != "completed"})


def test_random_prompts_have_exact_length_and_repeat_with_the_seed() -> None:
    first = make_prompts(5, 33, 7, api="sglang")
    assert [len(p) for p in first] == [33] * 5
    assert all(PROMPT_TOKEN_RANGE[0] <= t < PROMPT_TOKEN_RANGE[1] for p in first for t in p)
    assert make_prompts(5, 33, 7, api="openai") == first
    assert make_prompts(5, 33, 8, api="sglang") != first
    assert len(set(map(tuple, first))) == 5
    chat = make_prompts(2, 10, 7, api="openai-chat")
    assert all(isinstance(p, str) and len(p.split()) == 10 for p in chat)


def test_sharegpt_dataset_gives_the_human_turns(tmp_path) -> None:
    path = tmp_path / "sharegpt.json"
    path.write_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "human", "value": "hello there"},
                        {"from": "gpt", "value": "hi"},
                    ]
                },
                {"conversations": [{"from": "gpt", "value": "skipped"}]},
                {"conversations": [{"from": "human", "value": "second"}]},
            ]
        )
    )
    assert load_sharegpt(path) == ["hello there", "second"]
    picked = make_prompts(6, 99, 1, api="sglang", dataset=str(path))
    assert set(picked) <= {"hello there", "second"} and len(picked) == 6


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "not found"),
        ("{nope", "not readable JSON"),
        ('{"a": 1}', "JSON list"),
        ('[{"conversations": []}]', "conversations"),
    ],
)
def test_bad_dataset_is_a_one_line_config_error(tmp_path, content, message) -> None:
    path = tmp_path / "data.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=message) as caught:
        load_sharegpt(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)


def test_event_readers_take_the_servers_counts() -> None:
    sglang = api_format("sglang").read_event
    assert sglang({"text": "ab", "meta_info": {"completion_tokens": 2}}) == (True, 2, False)
    openai = api_format("openai").read_event
    assert openai({"choices": [{"text": "x"}]}) == (True, None, False)
    assert openai({"choices": [{"text": "x"}], "usage": {"completion_tokens": 3}}) == (True, 3, False)
    assert openai({"choices": [], "usage": {"completion_tokens": 9}}) == (False, 9, False)
    # The event that ends a reply says so: a strict server sends no [DONE] after it.
    assert openai({"choices": [{"text": "", "finish_reason": "length"}],
                   "usage": {"completion_tokens": 6}}) == (False, 6, True)
    chat = api_format("openai-chat").read_event
    assert chat({"choices": [{"delta": {"role": "assistant", "content": ""}}]}) == (False, None, False)
    assert chat({"choices": [{"delta": {}, "finish_reason": "stop"}]}) == (False, None, True)
    with pytest.raises(RequestFailed, match="overloaded"):
        openai({"error": {"message": "overloaded"}})
    with pytest.raises(RequestFailed, match="bad"):
        sglang({"error": "bad"})


def test_a_connect_timeout_is_not_described_as_a_read_timeout() -> None:
    import asyncio

    import aiohttp

    from tuner.loadgen._stream import describe_error

    connect = describe_error(aiohttp.ConnectionTimeoutError("Connection timeout to host"))
    read = describe_error(aiohttp.SocketTimeoutError("Timeout on reading data from socket"))
    assert connect == "ConnectionTimeoutError: no connection to the server within the connect timeout"
    assert read == "SocketTimeoutError: no data from the server within the read timeout"
    assert describe_error(asyncio.TimeoutError()).endswith("within the read timeout")
