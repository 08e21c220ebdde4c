"""Optuna is pinned to the range the suite runs against: the tuner uses its public API only,
and an Optuna outside the range fails here first, not somewhere in the loop."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
# Optuna's private names: attributes and modules with a leading underscore.
# (``tuner.study.storage._storage`` is the tuner's own module.)
PRIVATE = re.compile(r"(?<!tuner\.study\.storage)\._(storage|trial_id|study_id|get_trials|get_stale_trial_ids)\b"
                     r"|optuna(\.\w+)*\._\w+")


def _pinned(name: str) -> Requirement:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return next(r for r in map(Requirement, project["dependencies"]) if r.name == name)


def test_the_installed_optuna_is_inside_the_pinned_range() -> None:
    pinned = _pinned("optuna")
    assert pinned.specifier, "optuna is not pinned to a range"
    assert any(spec.operator == "<" for spec in pinned.specifier), f"{pinned}: no upper bound"
    assert pinned.specifier.contains(version("optuna")), f"optuna {version('optuna')} is outside {pinned}"


def test_the_tuner_uses_no_private_optuna_name() -> None:
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
             for path in sorted((REPO / "tuner").rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1) if PRIVATE.search(line)]
    assert not found, "\n".join(found)
