"""The end-of-run summary counts each kind of skip under its own name: configurations a
constraint excluded, and ones the feasibility gate held back as likely to fail."""

from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path

import optuna
from rich.console import Console

from bench.search_efficiency import ModelHost, ModelRunner
from tuner.space import load_space
from tuner.study.trial import BaselinePruner, FeasibilityCheck
from tuner.study.loop import ProgressView, optimize_study
from tuner.study.strategies._samplers import make_sampler

GLM5 = Path(__file__).resolve().parents[3] / "search_spaces" / "glm5.yaml"


def test_feasibility_skips_are_not_counted_as_constraint_skips() -> None:
    space = load_space(GLM5)
    out = io.StringIO()
    study = optuna.create_study(direction="maximize", sampler=make_sampler("tpe", 1),
                                pruner=BaselinePruner(space.objective.prune_margin))
    optimize_study(study, space, ModelRunner(ModelHost(space), 1, study), 30,
                   ProgressView(Console(file=out, width=400)),
                   feasibility=FeasibilityCheck.from_study(study, space))
    pruned_by = Counter(t.user_attrs.get("pruned_by") for t in study.trials)
    assert pruned_by["feasibility"] > 0 and pruned_by["constraint"] > 0, pruned_by
    done = next(line for line in out.getvalue().splitlines() if line.startswith("done:"))
    assert re.search(rf"\b{pruned_by['constraint']} skipped by constraints, "
                     rf"{pruned_by['feasibility']} skipped as likely to fail \(feasibility\), ",
                     done), (done, pruned_by)
