"""Fixtures for the search-space tests: the shipped glm5.yaml and spaces written to files."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.space import GLM5


@pytest.fixture
def glm5_data() -> dict[str, Any]:
    """search_spaces/glm5.yaml as plain data, to be changed by a test and written back."""
    return copy.deepcopy(yaml.safe_load(GLM5.read_text()))


@pytest.fixture
def write_space(tmp_path: Path) -> Callable[..., Path]:
    """Write a space (a dict, dumped in key order, or raw YAML text) to a file; return its path."""
    counter = iter(range(1000))

    def write(content: dict[str, Any] | str, name: str | None = None) -> Path:
        path = tmp_path / (name or f"space{next(counter)}.yaml")
        text = content if isinstance(content, str) else yaml.safe_dump(content, sort_keys=False)
        path.write_text(text)
        return path

    return write
