"""A trial's re-runs as every reader takes them (``repeats_of``), and stored by two writers at
once without losing one (``store_run``), on the storages a study lives in."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import optuna
import pytest

from tuner.study.record import REPEATS, repeats_of, store_run
from tuner.study.storage import open_storage

RUNS_EACH = 12


class _Attrs(dict):
    """A study's attributes, as ``set_user_attr`` leaves them."""

    def set_user_attr(self, key: str, value: object) -> None:
        self[key] = value


def test_runs_in_their_own_keys_follow_a_dict_written_before_them() -> None:
    attrs = _Attrs({REPEATS: {"3": {"values": [100.0, 98.0], "failed": [], "host_seconds": [5.0],
                                    "levels": [[{"concurrency": 8}]]}}})
    store_run(attrs, 3, 100.0, 101.0, None, 6.0, [{"concurrency": 8}])
    store_run(attrs, 3, 100.0, None, "crash: out of memory", 2.0)
    store_run(attrs, 5, 70.0, 72.0, None, 4.0, [{"concurrency": 16}])
    assert repeats_of(attrs) == {
        "3": {"values": [100.0, 98.0, 101.0], "failed": ["crash: out of memory"],
              "host_seconds": [5.0, 6.0, 2.0], "levels": [[{"concurrency": 8}], [{"concurrency": 8}]]},
        "5": {"values": [70.0, 72.0], "failed": [], "host_seconds": [4.0], "levels": [[{"concurrency": 16}]]},
    }
    assert attrs[REPEATS]["3"]["values"] == [100.0, 98.0]  # the reader never rewrites what is stored


def test_a_run_after_runs_stored_without_levels_reads_by_its_value() -> None:
    """A study written before re-runs kept their levels: levels beside values would no longer
    line up, so none are given and every run is read by its value."""
    attrs = _Attrs({REPEATS: {"0": {"values": [50.0, 49.0], "failed": []}}})
    store_run(attrs, 0, 50.0, 51.0, None, 3.0, [{"concurrency": 4}])
    assert repeats_of(attrs)["0"] == {"values": [50.0, 49.0, 51.0], "failed": [], "host_seconds": [3.0]}


def _writer(url: str, name: str, worker: int) -> None:
    study = optuna.load_study(study_name=name, storage=open_storage(url))
    for run in range(RUNS_EACH):
        store_run(study, 7, 1000.0, 1000.0 + 100 * worker + run, None, 1.0, [])


def _storages(tmp_path: Path) -> list[str]:
    return [str(tmp_path / "journal.db"), f"sqlite:///{tmp_path / 'study.sqlite'}"]


@pytest.mark.parametrize("kind", [0, 1], ids=["journal", "sqlite"])
def test_two_writers_at_once_keep_every_run(tmp_path: Path, kind: int) -> None:
    url = _storages(tmp_path)[kind]
    optuna.create_study(study_name="s", storage=open_storage(url))
    spawn = multiprocessing.get_context("spawn")
    writers = [spawn.Process(target=_writer, args=(url, "s", worker)) for worker in (1, 2)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
        assert writer.exitcode == 0
    runs = repeats_of(optuna.load_study(study_name="s", storage=open_storage(url)).user_attrs)["7"]
    assert runs["values"][0] == 1000.0
    assert sorted(runs["values"][1:]) == sorted(
        1000.0 + 100 * worker + run for worker in (1, 2) for run in range(RUNS_EACH)
    )
    # each writer's runs in the order it made them
    for worker in (1, 2):
        mine = [v for v in runs["values"][1:] if 100 * worker <= v - 1000.0 < 100 * (worker + 1)]
        assert mine == sorted(mine)
