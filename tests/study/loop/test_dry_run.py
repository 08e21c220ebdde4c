"""``tuner optimize --dry-run``: numbered as the run numbers its trials, each patch dimension shown
on or off, and an estimate in the run's own terms (emulated: seconds of wall time a trial)."""

from __future__ import annotations

import re

from optuna.trial import TrialState

from tests.support.studies import QUICK, SMALL, study_trials
from tuner.space import load_space


def dry_run_lines(run, trials: int, *extra: str) -> list[str]:
    result = run.run("optimize", str(run.path), "--trials", str(trials), "--emulate", "--seed",
                     "7", "--dry-run", *extra, env={"COLUMNS": "2000"})
    return [line for line in result.stdout.splitlines() if not line.startswith("guided: ")]


def test_the_dry_run_shows_what_the_run_then_runs(emulated_study) -> None:
    """With a strategy that only samples (tpe), the dry run shows the run's own trials."""
    run = emulated_study(workload__emulated=QUICK)
    lines = dry_run_lines(run, 3, "--strategy", "tpe")
    assert lines[0].startswith("baseline: ")
    assert lines[1].startswith("trial 1: ")  # the run's first sampled trial is trial 1
    run.optimize(2, "--strategy", "tpe")
    ran = study_trials(run.study())
    assert ran[1].state != TrialState.WAITING and not ran[1].user_attrs.get("is_baseline")
    space = load_space(run.path)
    config = space.config_from_params(ran[1].params)
    assert f"trial 1: {space.render(config, resolve=False).command_line}" in lines


def test_every_active_patch_dimension_is_shown_on_or_off(emulated_study) -> None:
    run = emulated_study(workload__emulated=SMALL)
    lines = dry_run_lines(run, 12)
    space = load_space(run.path)
    shown = [line.strip() for line in lines if line.strip().startswith("patch ")]
    assert shown and all(re.fullmatch(r"patch (autotune_gate|force_allreduce_fusion): (on|off)",
                                      line) for line in shown)
    blocks = "\n".join(lines).split("\ntrial ")
    for block in blocks[1:]:
        command = block.splitlines()[0]
        assert ("patch force_allreduce_fusion: " in block) == (
            "--enable-flashinfer-allreduce-fusion" in command), block
        assert ("patch autotune_gate: " in block) == (
            "--moe-runner-backend flashinfer_cutlass" in command), block
    assert space.parameters["force_allreduce_fusion"].patch == "force_allreduce_fusion"


def test_the_emulated_estimate_is_in_seconds_of_wall_time(emulated_study) -> None:
    run = emulated_study(workload__emulated=SMALL)
    last = dry_run_lines(run, 4)[-1]
    found = re.search(r"emulator runs (\d+)x faster: about (\d+) s of wall time a trial", last)
    assert found, last
    factor, seconds = int(found.group(1)), int(found.group(2))
    assert factor == SMALL["time_scale"] and seconds < 60


def test_the_default_strategy_s_dry_run_says_its_choices_come_from_measurements(emulated_study) -> None:
    run = emulated_study(workload__emulated=QUICK)
    result = run.run("optimize", str(run.path), "--trials", "2", "--emulate", "--dry-run",
                     env={"COLUMNS": "2000"})
    first = result.stdout.splitlines()[0]
    assert first.startswith("guided: after the baseline each trial is chosen from what the trials "
                            "before it measured"), first
    sampled = run.run("optimize", str(run.path), "--trials", "2", "--emulate", "--dry-run",
                      "--strategy", "tpe", env={"COLUMNS": "2000"})
    assert sampled.stdout.splitlines()[0].startswith("baseline: ")  # a sampler's run: no such note
