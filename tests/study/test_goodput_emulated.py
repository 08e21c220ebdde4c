"""`objective.metric: goodput` through the whole loop on the emulated GLM-5 host: a rate level is
judged against the arrival schedule it drew, a goodput of 0 never completes, and a baseline that
meets no rate stops the study (exit 2) with what to change."""

from __future__ import annotations

import re

import pytest
from optuna.trial import TrialState

from tests.study.conftest import N_ON

# Rate levels of 26 requests at K=50 (a level at 2 req/s: 13 host seconds, 0.26 s of wall time).
# The arrival schedule of trial 1's first level (seed [1, 2]) is drawn at 0.842x the rate asked.
RATES = {"requests_per_level": 26, "max_concurrency": 64, "time_scale": 50, "stream_interval": 32,
         "output_len": 64, "warmup": 2}


def _goodput(slo: dict[str, float], **search: float) -> dict:
    return {"metric": "goodput", "slo": slo, "goodput": {"start_rate": 1, "max_levels": 2, **search}}


def test_a_level_whose_schedule_drew_below_the_rate_is_judged_against_what_it_drew(emulated_study) -> None:
    """The baseline meets 1 and 2 req/s; trial 1 (the seeds' winner, far faster) starts at the
    baseline's floor, 1.8 req/s, whose Poisson schedule was drawn at 1.52 req/s. The client that
    sends that schedule on time is judged against the schedule: judged against the 1.8 asked
    (sent 1.52 < 0.9 x 1.8), the trial would be PRUNED as slower than the baseline."""
    run = emulated_study(workload__emulated=RATES, objective=_goodput({"p99_ttft_ms": 30000}))
    run.enqueue(N_ON)
    shown = run.optimize(2)
    baseline, winner = run.study().get_trials(deepcopy=False)[:2]
    assert baseline.state == TrialState.COMPLETE and baseline.value == 2.0, baseline.user_attrs["levels"]
    assert winner.state == TrialState.COMPLETE, winner.user_attrs.get("pruned_reason")
    first = winner.user_attrs["levels"][0]
    assert first["request_rate"] == pytest.approx(1.8)
    assert first["scheduled_request_rate"] < 0.9 * 1.8  # the draw itself, below 90% of the rate asked
    assert first["achieved_request_rate"] >= 0.9 * first["scheduled_request_rate"]
    assert first["meets_slo"] and first["repeated_prompts"] == 0
    assert winner.value >= 1.8
    # The progress line shows the rate the schedule drew beside the one sent.
    assert re.search(r"1\.8 req/s \(sent 1\.\d\d of 1\.5\d scheduled\)", shown.stdout + shown.stderr)


def test_a_baseline_that_meets_no_rate_stops_the_study_with_what_to_change(emulated_study) -> None:
    """A p99 TTFT limit of 1 ms: the baseline misses 1 and 0.5 req/s. It is PRUNED with its
    reason (never a COMPLETE goodput of 0, which left every later trial without a floor), and the
    run stops there, exit 2, naming start_rate and the SLO; the configuration queued after it
    never runs."""
    run = emulated_study(workload__emulated=RATES, objective=_goodput({"p99_ttft_ms": 1}))
    run.enqueue(N_ON)
    result = run.optimize(3, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    error = result.stderr.strip().splitlines()[-1]
    print(error)
    assert error.startswith(f"tuner: error: {run.path}:"), error
    assert ": objective.goodput.start_rate: the baseline (trial 0) ended PRUNED, goodput 0: no request " \
           "rate met within the SLO, down to 0.5 req/s (p99_ttft_ms " in error
    assert error.endswith("; fix: set start_rate below 0.5 req/s, or loosen objective.slo (p99_ttft_ms 1); "
                          "then run again with --allow-changed (the baseline runs again)"), error
    trials = run.study().get_trials(deepcopy=False)
    assert [t.state for t in trials if t.state != TrialState.WAITING] == [TrialState.PRUNED]
    baseline = trials[0]
    assert baseline.user_attrs["is_baseline"] and baseline.user_attrs["pruned_by"] == "baseline"
    assert baseline.user_attrs["pruned_reason"].startswith("goodput 0: no request rate met within the SLO")
    assert [lv["request_rate"] for lv in baseline.user_attrs["levels"]] == [1, 0.5]
