"""The record room is the one place that names what is stored on a trial, and studies written by
earlier versions of the tuner still read through it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest

from tuner.study.record import LEVELS, Level, Outcome, best_stable, read_levels, read_view, records
from tuner.study.storage import load_existing_study, resolve_storage

REPO = Path(__file__).resolve().parents[3]
STRING_KEYS = re.compile(r'user_attrs\.get\("|user_attrs\["|attrs\.set\(trial, "|store\(trial, "')
# Studies written by earlier versions, owned by the tests (tests/fixtures/studies/README.md):
# never the user's studies/ or run folders, which a demo run fills with files of any format.
STORED_STUDIES = sorted((REPO / "tests" / "fixtures" / "studies").glob("*.db"))


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
        for trial, row in zip(trials, rows, strict=True):  # every stored level reads back typed, as stored
            stored = trial.user_attrs.get(LEVELS) or []
            assert len(row.levels) == len(stored)
            for level, document in zip(row.levels, stored, strict=True):
                again = level.to_dict()  # figures added since the study was written: their defaults
                assert set(document) <= set(again), set(document) - set(again)
                assert {k: again[k] for k in document} == document
        if any(r.stable for r in rows):
            assert best_stable(study).value == max(r.value for r in rows if r.stable and r.value is not None)


def test_a_level_keeps_what_the_study_stored_beside_the_clients_figures() -> None:
    client = {"concurrency": 64, "num_requests": 128, "completed": 127, "failed": 1, "duration_s": 10.0,
              "input_tokens": 1, "output_tokens": 2, "output_throughput": 500.0, "total_throughput": 600.0,
              "request_throughput": 12.7}
    gpu = {"mean_power_w": 250.0, "total_power_w": 2000.0}
    goodput = {**client, "request_rate": 4.0, "gpu": gpu, "meets_slo": False, "slo_miss": "p99 TTFT 900 ms"}
    (level,) = read_levels([goodput])
    assert (level.gpu, level.meets_slo, level.slo_miss, level.tokens_per_joule) == (gpu, False, "p99 TTFT 900 ms", None)
    assert level.figure("output_throughput") == 500.0 and level.figure("goodput") is None
    assert {k: v for k, v in level.to_dict().items() if k in goodput} == goodput
    assert "meets_slo" not in Level.from_dict(client).to_dict()  # not a goodput level: nothing added
    assert read_levels([{"concurrency": 64}]) == ()  # no client figures: not a level
