"""Fixtures of the report tests: a synthetic study in real SQLite, and the `tuner` command.

``synthetic`` builds :mod:`tests.support.study_factory`'s study in a fresh SQLite file, once a
session; ``tuner`` runs the real command line (``python -m tuner``) in ``tmp_path`` and
returns the finished process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest

from tests.support.browser import CHROMIUM
from tests.support.study_factory import STUDY_NAME, make_study

REPO = Path(__file__).resolve().parents[2]
GLM5 = REPO / "search_spaces" / "glm5.yaml"


@dataclass(frozen=True)
class SyntheticStudy:
    """A study in ``db`` (``url``), named ``name``."""

    db: Path
    url: str
    name: str
    study: optuna.Study


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> SyntheticStudy:
    """The factory's study (baseline, completed, pruned, failed trials) in real SQLite.

    Shared by the session: tests only read it.
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    db = tmp_path_factory.mktemp("synthetic") / "studies" / "synthetic.db"
    db.parent.mkdir()
    url = f"sqlite:///{db}"
    return SyntheticStudy(db, url, STUDY_NAME, make_study(url))


@pytest.fixture
def tuner(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run ``python -m tuner ARGS`` in ``tmp_path``; returns the completed process."""

    def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tuner", *args],
            check=False,
            cwd=cwd or tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            env={**os.environ, "COLUMNS": "200"},
        )

    return run


@pytest.fixture
def chromium() -> str:
    """The Chromium binary (the test skips, with the fix, where it is missing)."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing: apt-get install -y chromium")
    return CHROMIUM
