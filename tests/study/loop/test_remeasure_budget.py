"""The budget a close pair's re-measures leave unspent goes back to the search.

The optimize loop stops searching to leave the last trials of ``--trials`` to re-measure a
close best and runner-up (:mod:`tuner.study.loop._confirm`). When the first re-run reads the pair
apart (here: the host's part of a re-run, stood in for, reads the best 30% above its first run,
which was its unluckiest; vLLM on this machine's CPU once read a first run 20% off its re-runs),
nothing close is left to re-measure, and the trials left search again:
the budget is spent either way. The search runs on the bench's model of the emulated host, with
its seeded noise (``bench/search_efficiency.py``).
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import optuna
import pytest
from rich.console import Console

from bench.search_efficiency import ModelHost, ModelRunner
from tests.study.conftest import N_ON
from tuner.space import load_space
from tuner.study.loop import Confirmation, OptimizeSummary, ProgressView, optimize_study
from tuner.study.record import CONFIRM_RUNS, WINNER_RUNS, close_pair, read_view, repeats_of
from tuner.study.strategies._samplers import make_sampler
from tuner.study.trial import BaselinePruner

GLM5 = Path(__file__).resolve().parents[3] / "search_spaces" / "glm5.yaml"
FAST = {**N_ON, "moe_runner_backend": "flashinfer_cutlass", "autotune_gate": True, "max_running_requests": 1024}


def _study(space, seed: int, fractions: tuple[float, ...]) -> optuna.Study:
    """A TPE study with the fast configuration queued at each ``mem_fraction_static`` (the model
    host serves them alike, within its noise, above what TPE finds)."""
    study = optuna.create_study(direction="maximize", sampler=make_sampler("tpe", seed),
                                pruner=BaselinePruner(space.objective.prune_margin))
    for fraction in fractions:
        study.enqueue_trial(space.params_for_enqueue({**FAST, "mem_fraction_static": fraction}))
    return study


def _optimize(monkeypatch, study: optuna.Study, space, budget: int, run_again) -> tuple[OptimizeSummary, str]:
    """``optimize_study`` on the bench's model host, re-runs made by ``run_again`` (the host's part
    of a re-run, stood in for); the summary and what the loop printed."""
    monkeypatch.setattr(Confirmation, "_run_again", run_again)
    out = io.StringIO()
    summary = optimize_study(study, space, ModelRunner(ModelHost(space), 1, study), budget,
                             ProgressView(Console(file=out, width=400)), confirm=Confirmation(study, space))
    return summary, out.getvalue()


def test_trials_a_re_measure_leaves_unspent_search_again(monkeypatch) -> None:
    space = load_space(GLM5)
    study = _study(space, 1, (0.91, 0.90))
    remeasured: list[int] = []

    def run_again(self, record, runner, runs, progress) -> bool:  # the host's part of a re-run
        remeasured.append(record.number)
        first = record.number == remeasured[0]  # the best's first run was its unluckiest
        self._store(record, record.value * (1.3 if first else 1.0), None, 1.0)
        return True

    summary, said = _optimize(monkeypatch, study, space, 12, run_again)
    assert "re-measuring trial" in said and len(remeasured) >= 1
    # the best re-read 30% higher twice: the pair came apart, and the search went on
    assert summary.remeasured == len(remeasured) < 4
    assert summary.ran + summary.remeasured == 12
    searched_after = [t for t in study.trials if t.number > max(remeasured)]
    assert searched_after, "no trial searched after the re-measure"
    assert re.search(r"done: \d+ run, \d+ re-measured", said)
    assert sum(len(r["values"]) - 1 for r in repeats_of(study.user_attrs).values()) == len(remeasured)


def test_a_winner_its_pair_s_re_runs_leave_in_the_lead_is_re_measured_too(monkeypatch) -> None:
    """The first two trials re-measured had lucky first runs (each re-run reads 4% lower): a
    trial measured once, close behind them, is then in the lead. The search kept room for it,
    so the winner of a close pair ends with its full runs, not one or two."""
    space = load_space(GLM5)
    study = _study(space, 1, (0.91, 0.90, 0.89))
    lucky: set[int] = set()

    def run_again(self, record, runner, runs, progress) -> bool:  # the host's part of a re-run
        if len(lucky) < 2:
            lucky.add(record.number)
        self._store(record, record.value * (0.96 if record.number in lucky else 1.0), None, 1.0)
        return True

    summary, said = _optimize(monkeypatch, study, space, 18, run_again)
    assert summary.ran + summary.remeasured == 18
    view = read_view(study)
    pair = close_pair(list(view.records), view.noise.relative)
    assert pair is not None, "the scenario needs a close pair at the end"
    spread = pair[0].spread(view.noise.relative)
    # its full runs, and the budget's last trial when nothing else was wanted of it
    assert spread is not None and spread.runs >= CONFIRM_RUNS, said[-2000:]
    # the budget's last trial was not searched: one searched last that came out best could not
    # have been re-measured
    assert f"re-measuring trial {pair[0].number} (run {spread.runs} of {spread.runs}): the budget's last trial" \
        in said, said[-2000:]


def test_a_winner_that_leads_clearly_is_still_measured_twice(monkeypatch) -> None:
    """One configuration far ahead of what the sampler finds: no close pair, yet the winner is
    run again (``WINNER_RUNS``), so the figure exported is a mean with a spread it measured. The
    re-run reads 2% lower; the trials the re-measure leaves search again, but for the budget's
    last, which runs the winner a third time (a trial searched last could not be re-measured)."""
    space = load_space(GLM5)
    study = _study(space, 2, (0.91,))
    remeasured: list[int] = []

    def run_again(self, record, runner, runs, progress) -> bool:  # the host's part of a re-run
        remeasured.append(record.number)
        self._store(record, record.value * 0.98, None, 1.0)
        return True

    summary, said = _optimize(monkeypatch, study, space, 12, run_again)
    view = read_view(study)
    assert close_pair(list(view.records), view.noise.relative) is None, "the scenario needs a clear lead"
    assert remeasured and summary.ran + summary.remeasured == 12, said[-2000:]
    winner = max((r for r in view.records if r.value is not None), key=lambda r: r.rank(view.noise.relative))
    assert f"re-measuring trial {winner.number} (run {WINNER_RUNS} of {WINNER_RUNS}): the best leads " \
           f"clearly but was measured once" in said, said[-2000:]
    assert f"re-measuring trial {winner.number} (run 3 of 3): the budget's last trial" in said, said[-2000:]
    searched_between = said.split(f"(run {WINNER_RUNS} of {WINNER_RUNS})")[1].split("(run 3 of 3)")[0]
    assert re.search(r"\ntrial \d+ \(\d+/12\)", searched_between), "nothing searched between the re-runs"
    spread = winner.spread(view.noise.relative)
    assert spread is not None and spread.runs == CONFIRM_RUNS, said[-2000:]
    assert spread.mean == pytest.approx(winner.value * (1 + 0.98 + 0.98) / 3)
    assert f"winner: trial {winner.number}: " in said and "over 3 runs" in said
    assert Confirmation(study, space).needed() == 0 and remeasured == [winner.number] * 2


def test_a_small_budget_s_last_trial_re_measures_a_close_pair(monkeypatch) -> None:
    """Six trials, as the vLLM study test runs: a close pair wants four re-runs, more than a third
    of a small budget may give, so the search goes on; yet the budget's last trial is not
    searched (one searched last that came out best could not be re-measured): it re-runs the
    pair's best. CI's vLLM study once ended with a close pair and no re-run at all."""
    space = load_space(GLM5)
    study = _study(space, 1, (0.91, 0.90))
    remeasured: list[int] = []

    def run_again(self, record, runner, runs, progress) -> bool:  # the host's part of a re-run
        remeasured.append(record.number)
        self._store(record, record.value, None, 1.0)
        return True

    summary, said = _optimize(monkeypatch, study, space, 6, run_again)
    view = read_view(study)
    assert close_pair(list(view.records), view.noise.relative) is not None, "the scenario needs a close pair"
    assert (summary.ran, summary.remeasured) == (5, 1), said[-2000:]
    assert len(remeasured) == 1 and re.search(r"re-measuring trial \d+ \(run 2 of 3\)", said), said[-2000:]
    # a configuration queued for the study (--from-study, --warm-start, by hand) runs first
    assert Confirmation(study, space).stop_search(5, 6)
    study.enqueue_trial(space.params_for_enqueue({**FAST, "mem_fraction_static": 0.89}))
    assert not Confirmation(study, space).stop_search(5, 6)
