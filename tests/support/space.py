"""Paths and a minimal search space shared by the search-space tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
GLM5 = REPO / "search_spaces" / "glm5.yaml"
REFERENCE = REPO / "tests" / "fixtures" / "reference"  # the project's copies of ../shared/reference


def small_space(parameters: dict[str, Any], baseline: dict[str, Any], **sections: Any
                ) -> dict[str, Any]:
    """A minimal valid space around ``parameters`` (tests add the sections they exercise)."""
    return {
        "name": "small",
        "server": {"command": "python3 -m sglang.launch_server",
                   "flags": {"--model-path": "/models/m"}},
        "parameters": parameters,
        "baseline": baseline,
        **sections,
    }
