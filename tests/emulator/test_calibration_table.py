"""calibration.py holds the table of calibration.md (the project's copy of the shared reference,
tests/fixtures/reference/calibration.md), and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tuner.emulator.calibration import (
    CALIBRATION_LEVELS,
    CALIBRATION_POINTS,
    CRASH,
    FIXED_ARGV,
    KV,
    MEMORY_LIMITS,
    STARTUP,
    WORKLOAD,
)

CALIBRATION_MD = Path(__file__).parents[1] / "fixtures" / "reference" / "calibration.md"


@pytest.fixture(scope="module")
def text() -> str:
    return CALIBRATION_MD.read_text()


def _cell(value: str) -> float | str | None:
    value = value.strip()
    if value in ("–", "-", ""):
        return None
    if value == "crash":
        return CRASH
    return float(value.replace(",", ""))


def _table(text: str) -> dict[str, tuple[str, dict[int, float | str]]]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    levels = [int(cell.removeprefix("c=")) for cell in header[2:]]
    rows = {}
    for line in lines[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        figures = {c: v for c, v in zip(levels, map(_cell, cells[2:])) if v is not None}
        rows[cells[0]] = (cells[1], figures)
    return rows


def test_every_point_and_figure_agrees_with_calibration_md(text: str) -> None:
    table = _table(text)
    assert [p.id for p in CALIBRATION_POINTS] == list(table)
    for point in CALIBRATION_POINTS:
        description, figures = table[point.id]
        assert dict(point.throughput) == figures, point.id
        assert tuple(sorted(figures)) == tuple(c for c in CALIBRATION_LEVELS if c in figures)
        for flag in re.findall(r"`(--[a-z-]+(?: [a-z_0-9]+)?)`", description):
            name, _, value = flag.partition(" ")
            assert name in point.argv, (point.id, name)
            if value:
                assert point.argv[point.argv.index(name) + 1] == value, (point.id, name)


def test_gate_and_allreduce_patches_of_each_point(text: str) -> None:
    table = _table(text)
    gate = {p.id: p.patched_gate for p in CALIBRATION_POINTS}
    assert gate == {"B": False, "N-off": True, "N-on": True, "N-on-unpatched": False, "F": True}
    assert "unpatched" in table["B"][0] and "gate patched" in table["N-off"][0]
    assert [p.id for p in CALIBRATION_POINTS if p.forced_allreduce] == ["F"]
    assert "forces FlashInfer allreduce fusion" in table["F"][0]


def test_fixed_flags_workload_and_limits_agree(text: str) -> None:
    fixed = re.search(r"Fixed flags of every configuration below: `([^`]+)`", text).group(1)
    words = fixed.replace("<glm5>", FIXED_ARGV[1]).split()
    assert tuple(words) == FIXED_ARGV
    assert "256 input and 256 output tokens" in text and "2c requests per level (at least 128)" in text
    assert (WORKLOAD.input_len, WORKLOAD.output_len, WORKLOAD.num_requests(32)) == (256, 256, 128)
    assert WORKLOAD.num_requests(1024) == 2048
    assert f"{KV.tokens_at_reference:,} tokens at 0.92" in text
    assert f"{KV.pool_gb_at_reference} GB a GPU, {KV.free_gb_at_reference:.2f} GB free" in text
    assert KV.tokens(0.92) == KV.tokens_at_reference
    assert "f ≥ 0.96 fails at start" in text and MEMORY_LIMITS.oom_at_start_fraction == 0.96
    assert "0.94 ≤ f < 0.96 starts cleanly, then fails at c ≥ 1024" in text
    assert MEMORY_LIMITS.oom_under_load_fraction == 0.94
    assert MEMORY_LIMITS.oom_under_load_concurrency == 1024
    assert f"{STARTUP.shards} safetensors shards" in text
    assert "The N-off crash, at c ≥ 512" in text
    assert MEMORY_LIMITS.prefill_metadata_crash_concurrency == 512
    assert "About 2 minutes follow" in text and STARTUP.kv_and_warmup_s == 120.0
    assert "adds about 20 s when graphs are on" in text and STARTUP.cuda_graph_capture_s == 20.0
    assert "83 shards load at 3-12 shards/s" in text and STARTUP.shards_per_s == (3.0, 12.0)
    assert "Autotune adds 30-60 s" in text and STARTUP.autotune_s == (30.0, 60.0)
