"""Tokens per joule, the best at each load and a winner's spread, read from the measured H200 study
(``bench/results/h200/study.db``: ``transformers serve`` on one NVIDIA H200, 2026-12-04) and
from figures written out here (the spread and tie rules are pure)."""

from __future__ import annotations

import shutil
from pathlib import Path

import optuna
import pytest

from tuner.report import build_report
from tuner.study.record import REPEATS, Spread, best_at, figure_text, best_by_load, energy_points, load_contrast, records, spread_of, tied, tokens_per_joule

H200 = Path(__file__).resolve().parents[3] / "bench" / "results" / "h200"


@pytest.fixture(scope="module")
def h200(tmp_path_factory: pytest.TempPathFactory) -> optuna.Study:
    copy = tmp_path_factory.mktemp("h200") / "study.db"  # opened from a copy: never written
    shutil.copy(H200 / "study.db", copy)
    return optuna.load_study(study_name="transformers-h200", storage=f"sqlite:///{copy}")


def test_the_h200_study_gives_tokens_per_joule_per_level(h200: optuna.Study) -> None:
    gpus = [line for line in (H200 / "machine.txt").read_text().splitlines() if line.startswith(("0, ", "1, "))]
    assert gpus == ["0, NVIDIA H200, 143771 MiB, 0 MiB, 81.22 W, 700.00 W, 9.0"]  # one GPU
    found = {r.number: r for r in records(h200)}
    levels = {lv.concurrency: lv for lv in found[11].levels}
    # Stored before the summed power existed: the per-GPU mean, one GPU (machine.txt lists one).
    assert tokens_per_joule(levels[64]) is None
    assert tokens_per_joule(levels[64], gpus=1) == pytest.approx(1955.58 / 166.48, rel=1e-4)
    assert round(tokens_per_joule(levels[64], gpus=1), 2) == 11.75
    assert round(tokens_per_joule(levels[1], gpus=1), 3) == 0.426
    baseline = {lv.concurrency: lv for lv in found[0].levels}
    assert round(tokens_per_joule(baseline[64], gpus=1), 2) == 4.77  # the winner: 2.5x the tokens a joule
    points = energy_points(records(h200), gpus=1)
    most = max(points, key=lambda p: p.tokens_per_joule)
    assert (most.trial, most.concurrency) == (11, 64)


def test_the_h200_study_has_a_best_at_each_load(h200: optuna.Study) -> None:
    bests = best_by_load(records(h200))
    assert [(b.concurrency, b.trial.number) for b in bests] == [(1, 12), (16, 11), (64, 11)]
    assert best_at(records(h200), 64).runner_up[0].number == 16
    contrast = load_contrast(bests, noise=0.02)
    assert contrast.startswith("the best at c=1 is trial 12 (84.99), not the best at c=64, trial 11 (1,956)")
    assert "trial 11 reads 84.55 there (-0.5%)" in contrast and "within the run-to-run noise" in contrast
    assert "within" not in load_contrast(bests, noise=0.001)
    with pytest.raises(Exception, match=r"--at 32: no stable trial measured that level; fix: use one of 1, 16, 64"):
        best_at(records(h200), 32)


def test_a_re_measured_trial_reads_the_mean_of_its_runs_at_each_level_and_ranks_as_the_winner(
        tmp_path: Path) -> None:
    copy = tmp_path / "study.db"  # a copy of the measured study, with re-runs of trial 11 written in
    shutil.copy(H200 / "study.db", copy)
    study = optuna.load_study(study_name="transformers-h200", storage=f"sqlite:///{copy}")
    own = study.trials[11].user_attrs["levels"]  # c=64: 1,956 tok/s; trial 16 read 1,948 there

    def rerun(share: float) -> list[dict]:
        return [{**level, "output_throughput": level["output_throughput"] * share} for level in own]

    first = own[0]["output_throughput"]
    study.set_user_attr(REPEATS, {"11": {"values": [first, first * 0.98, first * 0.97], "failed": [],
                                         "levels": [rerun(0.98), rerun(0.97)]}})
    at_64 = best_at(records(study), 64)
    assert at_64.trial.number == 16 and at_64.runs == 1  # trial 11's mean (-1.7%) is below trial 16's one run
    alone = best_at([r for r in records(study) if r.number == 11], 64)
    assert alone.figure == pytest.approx(first * (1 + 0.98 + 0.97) / 3) and alone.runs == 3
    # three runs whose mean (1,946) is a hair below trial 16's one run (1,948): by the mean alone
    # trial 16 wins; at the study's noise (3%) trial 16, measured once, gives up the whole noise
    # and trial 11 a third of it over three runs (1,912 against 1,890): the winner's own rule
    study.set_user_attr(REPEATS, {"11": {"values": [first, first * 0.995, first * 0.99], "failed": [],
                                         "levels": [rerun(0.995), rerun(0.99)]}})
    assert best_at(records(study), 64).trial.number == 16
    ranked = best_at(records(study), 64, noise=0.03)
    assert ranked.trial.number == 11 and ranked.runs == 3
    assert ranked.figure == pytest.approx(first * (1 + 0.995 + 0.99) / 3)
    assert figure_text(ranked) == f"{ranked.figure:,.4g}, mean of 3 runs"


def test_the_h200_report_draws_energy_and_the_best_per_load(h200: optuna.Study) -> None:
    page = build_report(h200)
    assert "Best stable configuration at each load" in page
    assert "Energy per token vs throughput" in page


def test_a_spread_over_runs_reads_as_plus_minus() -> None:
    spread = spread_of(4612.0, {"values": [4612.0, 4497.0, 4625.0], "failed": []})
    assert spread.runs == 3 and spread.text("tok/s") == "4,578 tok/s +- 1.5% over 3 runs"
    assert spread_of(4612.0, None).text() == "4,612"
    floor = spread_of(4612.0, {"values": [4612.0, 4612.0, 4612.0]}, noise=0.022)
    assert floor.sd == pytest.approx(0.022 * 4612.0)  # never below the stated noise
    assert "1 re-run(s) failed" in spread_of(1.0, {"values": [100.0, 101.0], "failed": ["hang"]}).text()


def test_two_are_tied_when_each_mean_is_within_the_others_spread() -> None:
    assert tied(Spread(4578, 96, 3), Spread(4500, 90, 3))
    assert not tied(Spread(4578, 96, 3), Spread(4450, 90, 3))
    assert not tied(Spread(4578, 200, 3), Spread(4450, 90, 3))  # within one's spread, not the other's
