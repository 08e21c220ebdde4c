"""docs/architecture.md names only files that exist.

A cheap check against the code: every repository path the page names (in backticks, in a table
cell, in the picture) exists; a bare module name in a table row (``_claim.py`` beside
``tuner/host/``) exists in that row's package; every row of "Where each change goes" names at
least one real file where the change goes. A module renamed or moved without the page fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "architecture.md"
# A repository path: tuner/..., bench/..., tests/..., search_spaces/... (placeholders such as
# <engine> and globs such as *.yaml are matched as globs).
_PATH = re.compile(r"\b((?:tuner|bench|tests|search_spaces)/[\w./<>*-]*)")
_MODULE = re.compile(r"`(\w+\.py)`")


def _exists(path: str) -> bool:
    path = path.rstrip(".,;:")
    if "<" in path or "*" in path:
        return any(REPO.glob(re.sub(r"<[^>]*>", "*", path)))
    return (REPO / path).exists()


def _table(heading: str) -> list[list[str]]:
    """The rows (cells) of the first table after ``heading``, header and rule left out."""
    text = DOC.read_text().split(heading, 1)[1]
    rows = []
    for line in text.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    return rows[2:]


def _package(cell: str) -> Path:
    """The package a row's first cell names: the folder, or the folder of the first file."""
    first = _PATH.search(cell)
    assert first, f"no path in {cell!r}"
    path = REPO / first.group(1).rstrip(".,;:")
    return path if path.is_dir() else path.parent


def test_every_path_the_page_names_exists() -> None:
    missing = sorted({p for p in _PATH.findall(DOC.read_text()) if not _exists(p)})
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


@pytest.mark.parametrize("heading", ["# Architecture: where each thing lives",
                                     "### The guided strategy's parts"])
def test_every_module_a_row_names_is_in_its_package(heading: str) -> None:
    rows = _table(heading)
    assert len(rows) >= 8
    missing = []
    for cells in rows:
        package = _package(cells[0]) if _PATH.search(cells[0]) else REPO / "tuner/study/strategies/guided"
        for name in _MODULE.findall(" ".join(cells)):
            if "/" not in name and not list(package.rglob(name)):
                missing.append(f"{package.relative_to(REPO)}/{name}")
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_every_change_row_names_a_real_file() -> None:
    rows = _table("## Where each change goes")
    assert len(rows) >= 7
    for change, where, also in rows:
        files = [p for p in _PATH.findall(where) if not p.endswith("/")]
        assert files, f"{change!r}: the row names no file where the change goes"
        missing = [p for p in files + _PATH.findall(also) if not _exists(p)]
        assert not missing, f"{change!r}: {missing} do not exist"


def test_the_check_finds_a_missing_module() -> None:
    assert _exists("tuner/signals/") and _exists("tuner/engines/<engine>.yaml")
    assert not _exists("tuner/observations.py")
