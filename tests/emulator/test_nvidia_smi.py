"""The stand-in nvidia-smi: the real CSV format (tests/fixtures/nvidia-smi), one-process
sampling loops, the emulated load in power and utilisation, compute apps, a foreign process."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.emulator import BASE_ARGV, Emulator
from tuner.emulator import prepare_host_root
from tuner.emulator.calibration import GPU
from tuner.loadgen import LevelSpec, run_level
from tuner.telemetry import parse_gpu_csv

FIXTURES = Path(__file__).parents[1] / "fixtures" / "nvidia-smi"  # real output of 2 x H200


@pytest.fixture
def host(tmp_path: Path) -> dict[str, str]:
    return prepare_host_root(tmp_path / "host")


def smi(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nvidia-smi", *args], env={**os.environ, **env}, capture_output=True,
                          text=True, timeout=30, stdin=subprocess.DEVNULL, check=False)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def same_format(real: str, ours: str) -> None:
    real_lines, our_lines = real.strip().splitlines(), ours.strip().splitlines()
    if real_lines[0].startswith(("index", "timestamp")):
        assert our_lines[0] == real_lines[0]  # the header, units included, exactly
        real_lines, our_lines = real_lines[1:], our_lines[1:]
    assert len(our_lines) % GPU.count == 0 and our_lines
    for ours_row in our_lines:
        real_row = real_lines[0].split(", ")
        cells = ours_row.split(", ")
        assert len(cells) == len(real_row)
        for real_cell, our_cell in zip(real_row, cells):
            if re.fullmatch(r"[\d.]+( [A-Za-z%]+)?", real_cell):  # a number, perhaps with a unit
                assert re.sub(r"[\d.]+", "9", our_cell) == re.sub(r"[\d.]+", "9", real_cell)


def test_csv_with_units_matches_the_real_idle_output(host: dict[str, str]) -> None:
    real = fixture("idle.csv")
    fields = [re.sub(r" \[.*\]$", "", f) for f in real.splitlines()[0].split(", ")]
    ours = smi(host, f"--query-gpu={','.join(fields)}", "--format=csv")
    assert ours.returncode == 0, ours.stdout
    same_format(real, ours.stdout)
    samples = parse_gpu_csv(ours.stdout)
    assert [s.index for s in samples] == list(range(8))
    assert {s.values["name"] for s in samples} == {GPU.name}
    assert {s.values["compute_cap"] for s in samples} == {"12.0"}
    assert {s.memory_total_mib for s in samples} == {97887.0}
    assert {s.power_limit_w for s in samples} == {600.0}
    assert all(s.memory_used_mib == 0 and s.utilization_pct == 0 for s in samples)
    assert len(parse_gpu_csv(real)) == 2  # the same parser reads the real file


def test_csv_without_header_and_units_matches_the_real_output(host: dict[str, str]) -> None:
    real = fixture("idle_nounits.csv")
    fields = ["index", "name", "compute_cap", "power.draw", "power.limit", "utilization.gpu",
              "memory.used", "memory.total"]
    ours = smi(host, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits").stdout
    same_format(real, ours)
    assert [s.power_limit_w for s in parse_gpu_csv(ours, fields)] == [600.0] * 8


def test_one_process_samples_every_interval_until_killed(host: dict[str, str]) -> None:
    real = fixture("load.csv")
    fields = [re.sub(r" \[.*\]$", "", f) for f in real.splitlines()[0].split(", ")]
    process = subprocess.Popen(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv",
                                "-lms", "100"], env={**os.environ, **host},
                               stdout=subprocess.PIPE, text=True, start_new_session=True)
    lines: list[str] = []
    try:
        assert process.stdout is not None
        while len(lines) < 1 + 8 * 4:  # four samples of eight GPUs, from one process
            line = process.stdout.readline()
            assert line, "the sampling loop ended"
            lines.append(line.rstrip("\n"))
        assert process.poll() is None  # still sampling
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.communicate(timeout=10)
    assert lines.count(lines[0]) == 1 and lines[0] == real.splitlines()[0]
    same_format(real, "\n".join(lines))
    stamps = [re.match(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}", line) for line in lines[1:]]
    assert all(stamps)


def test_unknown_field_is_refused_like_nvidia_smi(host: dict[str, str]) -> None:
    result = smi(host, "--query-gpu=index,power.bogus", "--format=csv")
    assert result.returncode == 2 and 'Field "power.bogus" is not a valid field' in result.stdout
    assert smi(host, "-L").stdout.count("NVIDIA RTX PRO 6000 Blackwell") == 8
    assert "GPU7" in smi(host, "topo", "-m").stdout


def test_foreign_process_on_gpu_0(host: dict[str, str]) -> None:
    foreign = {**host, "TUNER_EMULATOR_FOREIGN_GPU_PROCESS": "1"}
    apps = smi(foreign, "--query-compute-apps=pid,process_name,used_memory", "--format=csv")
    assert apps.stdout.splitlines()[0] == "pid, process_name, used_memory [MiB]"
    assert len(apps.stdout.splitlines()) == 2 and apps.stdout.splitlines()[1].startswith("2147, ")
    idle = smi(host, "--query-compute-apps=pid,process_name,used_memory", "--format=csv")
    assert idle.stdout.strip() == "pid, process_name, used_memory [MiB]"


def test_power_utilisation_memory_and_apps_follow_a_serving_emulator(
    host: dict[str, str], tmp_path: Path
) -> None:
    query = ["--query-gpu=index,power.draw,power.limit,utilization.gpu,memory.used",
             "--format=csv"]
    with Emulator(BASE_ARGV, tmp_path, env=host, time_scale=50.0) as emu:
        assert emu.wait_ready(60), emu.log()
        ready = parse_gpu_csv(smi(host, *query).stdout)
        apps = smi(host, "--query-compute-apps=pid,process_name,used_memory",
                   "--format=csv,noheader").stdout.strip().splitlines()
        spec = LevelSpec(concurrency=128, num_requests=256, input_len=256, output_len=256,
                         time_limit_s=3000)
        sampler = subprocess.Popen(["nvidia-smi", *query, "-lms", "200"], text=True,
                                   env={**os.environ, **host}, stdout=subprocess.PIPE,
                                   start_new_session=True)
        try:
            level = asyncio.run(run_level(emu.base_url, spec, api="sglang"))
        finally:
            os.killpg(sampler.pid, signal.SIGTERM)
            sampled, _ = sampler.communicate(timeout=10)
        pid = emu.process.pid
    assert level.completed == 256
    busy = [s for s in parse_gpu_csv(sampled, strict=False) if s.utilization_pct]
    after = parse_gpu_csv(smi(host, *query).stdout)
    assert len(apps) == 8 and all(line.startswith(f"{pid}, ") for line in apps)
    assert all(0.85 * GPU.memory_mib < s.memory_used_mib < GPU.memory_mib for s in ready)
    assert all(s.utilization_pct == 0 and s.power_draw_w < 120 for s in ready)
    assert len(busy) >= 8 and all(s.utilization_pct >= 90 for s in busy)
    assert all(230 <= s.power_draw_w <= 280 for s in busy)
    assert all(s.memory_used_mib == 0 and s.power_draw_w < 60 for s in after)


def test_a_foreign_job_holds_memory_on_its_own_gpus_only(host: dict[str, str]) -> None:
    shared = {**host, "TUNER_EMULATOR_GPUS": "16"}
    assert smi(shared, "-L").stdout.count("NVIDIA RTX PRO 6000 Blackwell") == 16
    job = subprocess.Popen([sys.executable, "-m", "tuner.emulator.foreign_process", "--gpus", "5,9",
                            "--mib", "30000"], env={**os.environ, **shared},
                           start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while "30000" not in smi(shared, "--query-compute-apps=pid,used_memory",
                                 "--format=csv,noheader,nounits").stdout:
            assert time.monotonic() < deadline and job.poll() is None
            time.sleep(0.2)
        used = parse_gpu_csv(smi(shared, "--query-gpu=index,uuid,memory.used", "--format=csv").stdout)
        assert {g.index for g in used if g.memory_used_mib} == {5, 9}
        uuids = {g.values["uuid"]: g.index for g in used}
        apps = smi(shared, "--query-compute-apps=pid,used_memory,gpu_uuid",
                   "--format=csv,noheader,nounits").stdout.strip().splitlines()
        assert sorted((line.split(", ")[0], uuids[line.split(", ")[2]]) for line in apps) == [
            (str(job.pid), 5), (str(job.pid), 9)]
    finally:
        os.killpg(job.pid, signal.SIGTERM)
        assert job.wait(timeout=10) == 0
    assert smi(shared, "--query-compute-apps=pid", "--format=csv,noheader").stdout.strip() == ""
    alone = subprocess.run([sys.executable, "-m", "tuner.emulator.foreign_process", "--gpus", "0"],
                           env={k: v for k, v in os.environ.items() if k != "TUNER_EMULATOR_STATE"},
                           capture_output=True, text=True, timeout=30, check=False)
    assert alone.returncode == 2 and "TUNER_EMULATOR_STATE is not set" in alone.stderr
