"""nvidia-smi CSV parsing on real output of a 2 x H200 machine, and the per-level sampler."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.host import FAKE_BIN, wait_until
from tuner.host import Host
from tuner.telemetry import GpuSampler, GpuSummary, busy_span, parse_gpu_csv, summarise, under_utilised

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia-smi"  # real output of 2 x H200
NOUNITS_FIELDS = [
    "index",
    "name",
    "compute_cap",
    "power.draw",
    "power.limit",
    "utilization.gpu",
    "memory.used",
    "memory.total",
]



def _stand_in_samplers() -> list[int]:
    """PIDs of the test's stand-in nvidia-smi running in loop mode."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if f"{FAKE_BIN}/nvidia-smi".encode() in words and b"-lms" in words:
            found.append(int(cmdline.parent.name))
    return found


def test_csv_with_header_and_units() -> None:
    samples = parse_gpu_csv((FIXTURES / "idle.csv").read_text())
    assert [s.index for s in samples] == [0, 1]
    first = samples[0]
    assert (first.power_draw_w, first.power_limit_w, first.utilization_pct) == (128.11, 700.0, 0.0)
    assert (first.memory_used_mib, first.memory_total_mib) == (0.0, 143771.0)
    assert first.values["name"] == "NVIDIA H200" and first.values["compute_cap"] == "9.0"
    assert first.values["clocks.current.sm"] == "1980" and first.values["pstate"] == "P0"
    assert samples[1].power_draw_w == 128.98


def test_csv_without_header_or_units_needs_the_queried_fields() -> None:
    text = (FIXTURES / "idle_nounits.csv").read_text()
    with pytest.raises(ValueError, match="header"):
        parse_gpu_csv(text)
    samples = parse_gpu_csv(text, NOUNITS_FIELDS)
    assert [(s.index, s.power_draw_w, s.memory_total_mib) for s in samples] == [
        (0, 128.11, 143771.0),
        (1, 129.0, 143771.0),
    ]
    with pytest.raises(ValueError, match="columns"):
        parse_gpu_csv(text, NOUNITS_FIELDS[:-1])


def test_sampled_load_gives_per_gpu_mean_and_peak() -> None:
    text = (FIXTURES / "load.csv").read_text()
    rows = [line for line in text.splitlines()[1:] if line.strip()]
    samples = parse_gpu_csv(text)
    assert len(samples) == len(rows) == 144
    assert samples[0].values["timestamp"] == "2026/11/30 11:35:03.666"
    summary = summarise(samples)
    assert summary is not None
    draws = [float(line.split(",")[2].split()[0]) for line in rows]  # the column, read plainly
    assert summary.max_power_w == max(draws) and summary.max_power_w > 650
    assert summary.mean_power_w == pytest.approx(sum(draws) / len(draws))
    assert (summary.power_limit_w, summary.max_util_pct, summary.max_memory_used_mib) == (
        700.0,
        100.0,
        883.0,
    )
    assert summary.samples == 144


def test_the_power_of_all_the_gpus_sampled_is_their_sum() -> None:
    samples = parse_gpu_csv((FIXTURES / "load.csv").read_text())  # 2 x H200, 72 ticks
    summary = summarise(samples)
    per_gpu = [[s.power_draw_w for s in samples if s.index == gpu] for gpu in (0, 1)]
    assert summary.gpus == 2 and len(per_gpu[0]) == len(per_gpu[1]) == 72
    ticks = [a + b for a, b in zip(*per_gpu)]  # each tick: GPU 0's row, then GPU 1's
    assert summary.total_power_w == pytest.approx(sum(ticks) / len(ticks))
    assert summary.total_power_w == pytest.approx(2 * summary.mean_power_w)


def test_under_utilised_means_mean_power_below_half_the_limit() -> None:
    idle = summarise(parse_gpu_csv((FIXTURES / "idle.csv").read_text()))
    busy = summarise(
        [
            s
            for s in parse_gpu_csv((FIXTURES / "load.csv").read_text())
            if (s.utilization_pct or 0) >= 100
        ]
    )
    assert idle is not None and busy is not None
    assert under_utilised(idle) and under_utilised(idle.to_dict())  # 128 W of 700 W
    assert not under_utilised(busy) and not under_utilised(busy.to_dict())
    seeds = GpuSummary(
        mean_power_w=250,
        max_power_w=280,
        power_limit_w=600,
        mean_util_pct=95,
        max_util_pct=100,
        max_memory_used_mib=90000,
        samples=8,
    )
    assert under_utilised(seeds)  # the seeds' 250 W of 600 W
    assert not under_utilised(None)


def test_sampler_runs_one_nvidia_smi_during_the_block(host: Host) -> None:
    env = {"PATH": f"{FAKE_BIN}:{os.environ['PATH']}", "FAKE_SMI_POWER": "420"}
    with GpuSampler(host, interval_ms=50, env=env) as sampler:
        log = Path(sampler.run_dir) / "gpu.csv"  # two lines a sample; the load decides how soon
        assert wait_until(lambda: log.exists() and len(log.read_text().splitlines()) >= 8, 60)
        running = _stand_in_samplers()
    assert len(running) == 1  # one long-running process, not one per sample
    summary = sampler.summary
    assert summary is not None
    assert summary.samples >= 4 and summary.samples % 2 == 0  # two GPUs a sample
    assert summary.max_power_w == 421.0  # GPU 1 draws 1 W more in the stand-in
    assert summary.mean_power_w == pytest.approx(420.5)
    assert (summary.power_limit_w, summary.max_util_pct) == (600.0, 97.0)
    assert not under_utilised(summary)
    assert _stand_in_samplers() == []
    assert not Path(sampler.run_dir).exists()


def test_sampler_keeps_only_the_gpus_the_server_uses(host: Host) -> None:
    env = {"PATH": f"{FAKE_BIN}:{os.environ['PATH']}", "FAKE_SMI_POWER": "420"}
    with GpuSampler(host, interval_ms=50, env=env, gpus=frozenset({1})) as sampler:
        log = Path(sampler.run_dir) / "gpu.csv"
        assert wait_until(lambda: log.exists() and len(log.read_text().splitlines()) >= 8, 60)
    summary = sampler.summary
    assert {s.index for s in sampler.samples} == {1}  # GPU 0 draws 420 W, GPU 1 421 W
    assert (summary.gpus, summary.mean_power_w, summary.total_power_w) == (1, 421.0, 421.0)


def test_sampler_without_nvidia_smi_gives_no_summary_and_no_error(host: Host) -> None:
    with GpuSampler(host, env={"PATH": "/usr/bin:/bin"}) as sampler:
        pass
    assert sampler.summary is None


def test_a_level_starts_once_the_sampler_samples(host: Host) -> None:
    # nvidia-smi takes a while to start: a level shorter than that (an emulated one, K times
    # faster) would end before the first sample and read its energy from idle cards or none
    slow = {"PATH": f"{FAKE_BIN}:{os.environ['PATH']}", "FAKE_SMI_POWER": "420", "FAKE_SMI_START_S": "1.0"}
    with GpuSampler(host, interval_ms=50, env=slow) as sampler:
        pass  # the level
    assert sampler.summary is not None and sampler.summary.samples >= 2, sampler.summary
    with GpuSampler(host, interval_ms=50, env=slow, first_sample_s=0.0) as unwaited:
        pass
    assert unwaited.summary is None  # no wait for the first sample: nothing sampled


def test_idle_ticks_before_and_after_the_level_are_not_its_own() -> None:
    def ticks(*utils: int) -> list:
        rows = "\n".join(f"{gpu}, {250 if u else 88}, 600, {u}, 90000, 97887" for u in utils for gpu in (0, 1))
        return parse_gpu_csv(rows, ["index", "power.draw", "power.limit", "utilization.gpu", "memory.used", "memory.total"])

    samples = ticks(0, 0, 97, 0, 99, 0)  # idle, idle, busy, a pause, busy, idle
    kept = busy_span(samples)
    assert [s.utilization_pct for s in kept[::2]] == [97, 0, 99]  # the pause inside stays
    assert summarise(kept).mean_power_w == pytest.approx((250 + 88 + 250) / 3)
    busy = busy_span(samples, every_idle_tick=True)  # an emulated host: the client's pauses go
    assert [s.utilization_pct for s in busy[::2]] == [97, 99] and summarise(busy).mean_power_w == 250
    assert busy_span(ticks(0, 0)) == ticks(0, 0)  # never busy: all stay on a real host
    assert busy_span(ticks(0, 0), every_idle_tick=True) == []  # an emulated one: no power figure
