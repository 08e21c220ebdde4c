"""The rate a client achieved on an open loop: from the first request's due time to the last
send, so a client late for its first requests (and caught up after) does not read as faster
than its schedule; a client that falls behind reads slower."""

from __future__ import annotations

import pytest

from tuner.loadgen._open_loop import achieved_rate
from tuner.loadgen._stream import COMPLETED, RequestLog
from tuner.timescale import TimeScale


def _log(due: list[float], sent: list[float]) -> RequestLog:
    log = RequestLog(len(due))
    for i, (d, s) in enumerate(zip(due, sent)):
        log.status[i], log.due[i], log.sent[i] = COMPLETED, d, s
    return log


def test_late_first_sends_that_catch_up_read_the_schedule_s_rate() -> None:
    due = [100.0 + 0.5 * i for i in range(60)]  # 2 a second
    sent = [max(d, 102.5) for d in due]  # the first six go out 2.5 s late, together
    assert achieved_rate(_log(due, sent), TimeScale()) == pytest.approx(2.0)
    # No schedule (every due time 0): counted from the first send, 59 requests in 27 s, 2.19 req/s.
    plain = _log([0.0] * 60, sent)
    assert achieved_rate(plain, TimeScale()) == pytest.approx(59 / 27.0)


def test_a_client_that_falls_behind_reads_below_the_schedule() -> None:
    due = [100.0 + 0.5 * i for i in range(60)]
    sent = [d + 0.1 * i for i, d in enumerate(due)]  # later and later
    assert achieved_rate(_log(due, sent), TimeScale()) == pytest.approx(59 / (29.5 + 5.9))
