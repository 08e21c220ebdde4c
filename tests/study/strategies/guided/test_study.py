"""The guided strategy through the product's optimize loop on a model host (bench/landscapes):
every proposal's move is stored on its trial and renders its ``chosen_by``, and a study written
before moves were stored (``chosen_by`` only) resumes exactly as the same study with its moves."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import create_trial
from rich.console import Console

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO / "bench"))

from landscapes import GeneratedLandscape  # noqa: E402
from search_efficiency import ModelRunner  # noqa: E402

from tuner.space import load_space  # noqa: E402
from tuner.study.record import CHOSEN_BY, CONFIG, MOVE, read_view  # noqa: E402
from tuner.study.record import PROBE_REFERENCE  # noqa: E402
from tuner.study.loop import ProgressView, optimize_study, study_pruner  # noqa: E402
from tuner.study.strategies import Move, MoveKind  # noqa: E402
from tuner.study.strategies.guided import GuidedStrategy  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)
SEED = 3


@pytest.fixture(scope="module")
def space() -> Any:
    return load_space(REPO / "search_spaces" / "glm5.yaml")


def _study(space: Any) -> optuna.Study:
    study = optuna.create_study(directions=["maximize"], pruner=study_pruner(space))
    study.set_user_attr(PROBE_REFERENCE, [])  # a model host has its probe reference
    return study


def _run(study: optuna.Study, space: Any, trials: int) -> None:
    """``trials`` host-run trials of a fresh guided strategy (as a resumed ``tuner optimize``)."""
    strategy = GuidedStrategy(space, SEED)
    study.sampler = strategy.sampler()
    runner = ModelRunner(GeneratedLandscape(SEED, space), SEED, study)
    optimize_study(study, space, runner, trials, ProgressView(Console(file=io.StringIO())), strategy=strategy)


def _without_moves(study: optuna.Study, space: Any) -> optuna.Study:
    """The same trials as a study written before moves were stored: ``chosen_by`` only."""
    old = _study(space)
    for t in study.trials:
        old.add_trial(create_trial(
            state=t.state, values=t.values, params=t.params, distributions=t.distributions,
            user_attrs={k: v for k, v in t.user_attrs.items() if k != MOVE},
            system_attrs=t.system_attrs, intermediate_values=t.intermediate_values,
        ))
    return old


def _trials(study: optuna.Study) -> list[tuple[Any, ...]]:
    return [(t.number, t.state, t.user_attrs.get(CONFIG), t.user_attrs.get(CHOSEN_BY), t.values)
            for t in study.trials]


def test_every_proposal_stores_its_move_and_an_older_study_resumes_the_same(space: Any) -> None:
    study = _study(space)
    _run(study, space, 24)
    stored = [(t.user_attrs[CHOSEN_BY], Move.from_dict(t.user_attrs[MOVE]))
              for t in study.trials if MOVE in t.user_attrs]
    assert all(move.reason == chosen_by for chosen_by, move in stored)
    assert {MoveKind.RULE, MoveKind.SWEEP} <= {move.kind for _, move in stored}
    unmoved = {t.user_attrs[CHOSEN_BY] for t in study.trials if MOVE not in t.user_attrs}
    assert unmoved <= {"baseline", "sampler: guided"}, unmoved

    old = _without_moves(study, space)
    read_now, read_old = read_view(study, space).records, read_view(old, space).records
    assert [r.move.key if r.move else None for r in read_old] == [r.move.key if r.move else None for r in read_now]
    # resumed with a fresh strategy, as `tuner optimize` does on a stored study: the same trials
    _run(study, space, 12)
    _run(old, space, 12)
    assert _trials(old) == _trials(study)
    assert len(study.trials) >= 36
