"""``tuner optimize --strategy``: bad input is refused in one line before any host time; every
trial says why it was chosen, in the terminal and in ``tuner trials --csv``."""

from __future__ import annotations

import csv
import io
import re
import sys
from pathlib import Path

import pytest
import yaml

from tests.study.conftest import GLM5

# Which trial is chosen and why is asserted, not what it measured: short start-ups at K=200.
SMALL = {"levels": [64, 256], "output_len": 128, "requests_per_level": {"per_concurrency": 1, "min": 64},
         "time_scale": 200, "stream_interval": 32}


def _run(tmp_path: Path, *args: str) -> "subprocess.CompletedProcess[str]":
    import os
    import subprocess

    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=dict(os.environ), stdin=subprocess.DEVNULL)


def _space_with(tmp_path: Path, parameter: str, **fields: object) -> Path:
    document = yaml.safe_load(GLM5.read_text())
    document["parameters"][parameter].update(fields)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _refused(result, tmp_path: Path) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert not (tmp_path / "studies").exists()  # no study made, no host touched
    return lines[0]


def test_unknown_strategy_is_refused_before_any_host_time(tmp_path) -> None:
    line = _refused(_run(tmp_path, "optimize", str(GLM5), "--emulate", "--strategy", "annealing"), tmp_path)
    assert line == "tuner: error: --strategy annealing: unknown; fix: use one of guided, tpe, random, one-at-a-time"


def test_unknown_sampler_and_both_options_are_refused(tmp_path) -> None:
    line = _refused(_run(tmp_path, "optimize", str(GLM5), "--emulate", "--sampler", "annealing"), tmp_path)
    assert line.startswith("tuner: error: --sampler annealing: unknown; fix: use one of guided, tpe, random, ")
    assert line.endswith("gp, cmaes, qmc, nsga2, bruteforce")  # the strategies, then Optuna's samplers
    line = _refused(_run(tmp_path, "optimize", str(GLM5), "--emulate", "--sampler", "tpe", "--strategy", "random"),
                    tmp_path)
    assert line == "tuner: error: --sampler tpe with --strategy random: give one; fix: drop --sampler"


@pytest.mark.parametrize("parameter, shape, reason, fix", [
    ("mem_fraction_static", "cliff", "'cliff' is not a shape", "use one of up_to_failure, saturating, or drop shape:"),
    ("attention_backend", "up_to_failure",
     "up_to_failure applies to numbers, but the values are 'flashinfer', 'triton', 'fa3'",
     "drop shape: here, or declare it on an int or float parameter"),
])
def test_bad_shape_is_one_line_naming_file_field_and_fix(tmp_path, parameter, shape, reason, fix) -> None:
    path = _space_with(tmp_path, parameter, shape=shape)
    line = _refused(_run(tmp_path, "optimize", str(path), "--emulate", "--trials", "1"), tmp_path)
    assert re.fullmatch(rf"tuner: error: {re.escape(str(path))}:\d+: parameters\.{parameter}\.shape: "
                        rf"{re.escape(reason)}; fix: {re.escape(fix)}", line), line


def test_dry_run_accepts_every_strategy_and_the_older_samplers(tmp_path) -> None:
    for option in (["--strategy", "one-at-a-time"], ["--strategy", "random"], ["--sampler", "qmc"], ["--sampler", "tpe"]):
        result = _run(tmp_path, "optimize", str(GLM5), "--emulate", "--dry-run", "--trials", "2", *option)
        assert result.returncode == 0, result.stderr
        assert "baseline" in result.stdout


def test_every_trial_says_why_it_was_chosen(emulated_study) -> None:
    run = emulated_study(workload__emulated=SMALL)
    result = run.optimize(3, "--strategy", "one-at-a-time")
    assert "chosen by one-at-a-time: moe_runner_backend=auto from trial 0" in result.stderr
    table = run.run("trials", str(run.path), "--emulate", "--csv").stdout
    rows = list(csv.DictReader(io.StringIO(table)))
    assert [row["chosen_by"] for row in rows][:2] == ["baseline", "one-at-a-time: moe_runner_backend=auto from trial 0"]
    assert all(row["chosen_by"].startswith(("baseline", "one-at-a-time: ")) for row in rows)
    stored = [t.user_attrs["chosen_by"] for t in run.study().trials]
    assert stored == [row["chosen_by"] for row in rows]
    # What the server log said is stored with each trial that ran.
    # (the baseline's cap is 64: every level's running batch reads at most that; on a loaded
    # machine one level once read no decode line, cause not found, so any level counts)
    observations = run.study().trials[0].user_attrs["observations"]
    running = [v for k, v in observations.items() if k.startswith("running_req_max@")]
    assert observations["kv_tokens"] > 0 and running and all(0 < v <= 64 for v in running), observations
