"""Ctrl-C (or SIGTERM) while the optimize loop creates a trial: the trial is failed as interrupted,
never left RUNNING with nobody to fail it (the loop holds the signal through ``study.ask()``).

Once in a full-suite run, a worker stopped by SIGTERM left one trial RUNNING
(``tests/scale/test_parallel_workers.py``); here the signal is sent from inside ``ask`` itself, on
the bench's model of the emulated host (``bench/search_efficiency.py``)."""

from __future__ import annotations

import io
import os
import signal
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from rich.console import Console

from bench.search_efficiency import ModelHost, ModelRunner
from tuner.space import load_space
from tuner.study.loop import ProgressView, optimize_study
from tuner.study.record import FAILURE_REASON

GLM5 = Path(__file__).resolve().parents[3] / "search_spaces" / "glm5.yaml"


def test_an_interrupt_while_a_trial_is_created_fails_that_trial(monkeypatch) -> None:
    space = load_space(GLM5)
    study = optuna.create_study(direction="maximize")
    real_ask = study.ask

    def ask(*args, **kwargs):  # the signal arrives after the trial exists, before ask returns
        trial = real_ask(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the handler runs here unless the signal is held
        return trial

    monkeypatch.setattr(study, "ask", ask)
    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        optimize_study(study, space, ModelRunner(ModelHost(space), 1, study), 3,
                       ProgressView(Console(file=out, width=200)))
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.FAIL], out.getvalue()[-1000:]
    assert trials[0].user_attrs[FAILURE_REASON] == "interrupted"
