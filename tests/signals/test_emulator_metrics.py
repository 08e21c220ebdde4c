"""The emulator's /metrics (SGLang 0.5.9's names) and --log-level warning, read by the tuner's
metrics observer: the level's figures come from /metrics, none from the log."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

from tests.support.emulator import BASE_ARGV, Emulator, get_json
from tuner.engines import load_profile
from tuner.loadgen import LevelSpec, run_level
from tuner.signals import LogObserver, MetricsObserver, Source, level_observations, sample_metrics
from tuner.timescale import TimeScale


def _level(emulator: Emulator, extra: list[str]) -> tuple[MetricsObserver, LogObserver]:
    profile = load_profile("sglang")
    metrics = MetricsObserver(profile.metrics_observations, profile.metrics_path)
    session = SimpleNamespace(metrics=metrics, base_url=emulator.base_url, client_headers={}, phase="level-256")
    spec = LevelSpec(concurrency=256, num_requests=256, input_len=256, output_len=256, time_limit_s=40_000)
    with sample_metrics(session, emulated=True):
        asyncio.run(run_level(emulator.base_url, spec, api="sglang", time_scale=TimeScale(400)))
    log = LogObserver(profile.log_observations)
    for line in emulator.log().splitlines():
        log.feed(line, "level-256")
    return metrics, log


def test_warning_level_hides_decode_lines_and_metrics_give_the_level(tmp_path: Path) -> None:
    argv = [*BASE_ARGV, "--max-running-requests", "64", "--time-scale", "400", "--emulator-seed", "1",
            "--log-level", "warning", "--enable-metrics"]
    with Emulator(argv, tmp_path) as emulator:
        assert emulator.wait_ready(), emulator.log()[-2000:]
        metrics, log = _level(emulator, argv)
        text = emulator.log()
    assert "Decode batch" not in text and "Prefill batch" not in text and "EMULATED" in text
    assert metrics.scrapes >= 3 and metrics.unavailable is None
    seen = level_observations({Source.SERVER_LOG: log, Source.METRICS: metrics}, "level-256", 256, cap=64)
    assert seen.values["running_req_max"] == 64.0
    assert seen.values["running_req_at_cap_fraction"] >= 0.5, (seen.values, metrics.scrapes)
    assert seen.values["queue_req_max"] > 0 and 0 < seen.values["token_usage_max"] <= 1
    assert seen.values["kv_tokens"] > 0
    assert set(seen.sources.values()) == {Source.METRICS}, seen.sources  # nothing from the log


def test_without_enable_metrics_the_endpoint_is_404_and_asked_once(tmp_path: Path) -> None:
    argv = [*BASE_ARGV, "--time-scale", "400", "--emulator-seed", "1"]
    with Emulator(argv, tmp_path) as emulator:
        assert emulator.wait_ready(), emulator.log()[-2000:]
        assert get_json(f"{emulator.base_url}/metrics")[0] == 404
        metrics, log = _level(emulator, argv)
    assert metrics.unavailable == "HTTP 404 from /metrics" and metrics.scrapes == 0
    seen = level_observations({Source.SERVER_LOG: log, Source.METRICS: metrics}, "level-256", 256)
    assert seen.values["running_req_max"] > 0 and seen.sources["running_req_max"] is Source.SERVER_LOG
