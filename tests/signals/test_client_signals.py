"""Client-level signals over levels built from real-looking numbers (the calibration's points,
tests/fixtures/reference/calibration.md, and issue 28's held-out baseline)."""

from __future__ import annotations

from tuner.loadgen import LevelMetrics
from tuner.signals import ClientSignal, batch_saturates, cap_binds, client_observations, failures_above, requests_queue
from tuner.study.strategies._moves import Source


def level(c: int, tps: float, ttft: float | None = None, tpot: float | None = None, failed: int = 0,
          stop: str | None = None) -> LevelMetrics:
    n = max(128, 2 * c)
    return LevelMetrics(concurrency=c, num_requests=n, completed=n - failed, failed=failed,
                        duration_s=n * 256 / max(tps, 1.0), input_tokens=n * 256, output_tokens=(n - failed) * 256,
                        output_throughput=tps, total_throughput=2 * tps, request_throughput=tps / 256,
                        median_ttft_ms=ttft, median_tpot_ms=tpot, stop_reason=stop)


# issue 28's held-out baseline: a cap of 64, throughput flat from 64 to 512 streams
HELD_OUT = [level(64, 2083.0, 300.0, 30.0), level(256, 2150.0, 4100.0, 30.5), level(512, 2185.0, 12500.0, 29.8)]
# calibration point B (cap 64): 757, 880, 880, 880; N-on (no cap): 760, 2,000, 2,800, 3,740
POINT_B = [level(64, 757.0), level(256, 880.0), level(512, 880.0), level(1024, 880.0)]
N_ON = [level(64, 760.0, 250.0, 80.0), level(256, 2000.0, 300.0, 120.0), level(512, 2800.0, 350.0, 170.0),
        level(1024, 3740.0, 420.0, 260.0)]


def test_a_cap_binds_when_throughput_runs_flat_above_it() -> None:
    seen = cap_binds(HELD_OUT, 64)
    assert seen is not None and (seen.signal, seen.low, seen.high, seen.cap) == (ClientSignal.CAP_BINDS, 64, 512, 64)
    assert seen.source is Source.CLIENT
    assert seen.says == "cap binds at 64: throughput flat from 64 to 512 (client)"
    point_b = cap_binds(POINT_B, 64)  # 757 -> 880 is +16%, but 880 from 256 to 1,024 is flat
    assert point_b is not None and (point_b.low, point_b.high) == (256, 1024)


def test_a_cap_that_throughput_rises_past_does_not_bind() -> None:
    assert cap_binds(N_ON, 64) is None  # 760 -> 3,740: the batch grew
    assert cap_binds(HELD_OUT, None) is None  # no cap known: nothing to say
    assert cap_binds(HELD_OUT, 512) is None  # one level at or above it: not enough


def test_requests_queue_when_ttft_rises_and_tpot_stays_flat() -> None:
    seen = requests_queue(HELD_OUT)
    assert seen is not None and seen.signal is ClientSignal.REQUESTS_QUEUE and seen.ratio > 40
    assert requests_queue(N_ON) is None  # TPOT rose 3x: the batch grew, nothing queued


def test_a_batch_saturates_when_tpot_rises_and_throughput_stays_flat() -> None:
    saturated = [level(64, 3000.0, 200.0, 21.0), level(256, 3200.0, 260.0, 80.0)]
    seen = batch_saturates(saturated)
    assert seen is not None and seen.signal is ClientSignal.BATCH_SATURATES and round(seen.ratio, 1) == 3.8
    assert batch_saturates(N_ON) is None  # TPOT rose, but so did throughput
    assert batch_saturates(HELD_OUT) is None  # flat, but TPOT flat too


def test_failures_above_a_concurrency() -> None:
    # calibration point N-off: 689 at 64, 1,950 at 256, the server crashes at 512
    n_off = [level(64, 689.0), level(256, 1950.0), level(512, 0.0, failed=1024, stop="the server died")]
    seen = failures_above(n_off)
    assert seen is not None and (seen.low, seen.high, seen.ratio) == (256, 512, 1.0)
    assert failures_above(N_ON) is None
    assert failures_above([level(64, 0.0, failed=128, stop="died")]) is None  # nothing clean below


def test_every_signal_of_a_trial_at_once() -> None:
    kinds = [o.signal for o in client_observations(HELD_OUT, cap=64)]
    assert kinds == [ClientSignal.CAP_BINDS, ClientSignal.REQUESTS_QUEUE]
    assert client_observations(N_ON, cap=None) == []
