"""The record room is the one place that names what is stored on a trial, and studies written by
earlier versions of the tuner still read through it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest

from tuner.study.record import Outcome, best_stable, read_view, records
from tuner.study.storage import load_existing_study, resolve_storage

REPO = Path(__file__).resolve().parents[2]
STRING_KEYS = re.compile(r'user_attrs\.get\("|user_attrs\["|attrs\.set\(trial, "|store\(trial, "')
STORED_STUDIES = sorted(REPO.glob("bench/results/**/*.db")) + sorted(REPO.glob("studies/*.db"))


def test_no_attribute_key_is_spelt_as_a_string_outside_the_record_room() -> None:
    record_room = REPO / "tuner" / "study" / "record"
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for folder in ("tuner", "bench")
        for path in sorted((REPO / folder).rglob("*.py"))
        if record_room not in path.parents
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if STRING_KEYS.search(line)
    ]
    assert found == [], "string attribute keys outside tuner/study/record/:\n" + "\n".join(found)


@pytest.mark.parametrize("stored", STORED_STUDIES, ids=lambda p: str(p.relative_to(REPO)))
def test_a_study_written_by_earlier_code_still_loads(stored: Path, tmp_path: Path) -> None:
    copy = tmp_path / stored.name  # opening may migrate the schema: never the committed file
    shutil.copy(stored, copy)
    url, _ = resolve_storage(str(copy))
    names = [s.study_name for s in optuna.get_all_study_summaries(url, include_best_trial=False)]
    assert names, f"{stored} holds no study"
    for name in names:
        study = load_existing_study(url, name)
        trials = study.get_trials(deepcopy=False)
        rows = records(study)
        assert [r.number for r in rows] == [t.number for t in trials]
        complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
        objective = SimpleNamespace(metric="output_throughput", max_failed_fraction=0.01)
        view = read_view(study, SimpleNamespace(objective=objective))
        assert len(view.records) == len(trials)
        assert len(view.complete()) + sum(r.outcome == Outcome.REUSED and r.value is not None for r in view.records) == len(complete)
        assert all(r.outcome not in (Outcome.RUNNING, Outcome.WAITING) for r in view.records)
        if any(r.stable for r in rows):
            assert best_stable(study).value == max(r.value for r in rows if r.stable and r.value is not None)
