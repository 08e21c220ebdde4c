"""A worker handed a configuration while another worker's baseline runs waits, inside the
trial, for the baseline's probe outputs before probing it (the wait before ``ask`` and the
``ask`` are not one step: on CI an enqueued fa3 was probed with nothing to compare against)."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from rich.console import Console

from tuner.errors import TunerError
from tuner.space import load_space
from tuner.study.record import PROBE_REFERENCE
from tuner.study.loop._optimize import _await_reference
from tuner.study.loop import ProgressView
from tuner.study.record import IS_BASELINE

GLM5 = Path(__file__).resolve().parents[3] / "search_spaces" / "glm5.yaml"


def _two_running(tmp_path: Path) -> tuple[optuna.Study, optuna.Trial, optuna.Trial]:
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", direction="maximize")
    baseline = study.ask()  # worker A's
    baseline.set_user_attr(IS_BASELINE, True)
    other = study.ask()  # worker B's, asked before A's probe ran
    return study, baseline, other


def test_the_other_worker_waits_for_the_baseline_s_probe_outputs(tmp_path: Path) -> None:
    study, _, other = _two_running(tmp_path)
    space = load_space(GLM5)
    timer = threading.Timer(0.5, study.set_user_attr, (PROBE_REFERENCE, ["ok"] * 3))
    timer.start()
    out = io.StringIO()
    started = time.monotonic()
    _await_reference(study, space, other, ProgressView(Console(file=out)))
    assert time.monotonic() - started >= 0.5
    assert "waiting for the baseline" in out.getvalue()
    assert study.user_attrs[PROBE_REFERENCE] == ["ok"] * 3


def test_a_baseline_that_failed_fails_the_waiting_trial_and_stops(tmp_path: Path) -> None:
    study, baseline, other = _two_running(tmp_path)
    study.tell(baseline, state=TrialState.FAIL)
    with pytest.raises(TunerError, match="no probe reference"):
        _await_reference(study, load_space(GLM5), other, ProgressView(Console(file=io.StringIO())))
    frozen = study.trials[other.number]
    assert frozen.state == TrialState.FAIL and frozen.user_attrs["failure_reason"] == "host-error"
