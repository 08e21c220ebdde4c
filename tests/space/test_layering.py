"""Loading a search space needs no host layer: no SSH library, no ``tuner.host`` (issue 12, item 9).

Checked in a fresh interpreter, where ``sys.modules`` shows exactly what loading imported."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CODE = """
import json, sys
from tuner.space import load_space
space = load_space(sys.argv[1])
assert space.params["mem_fraction_static"].kind == "float"
print(json.dumps(sorted(sys.modules)))
"""


def test_loading_a_yaml_imports_no_host_layer() -> None:
    done = subprocess.run([sys.executable, "-c", CODE, str(REPO / "search_spaces" / "glm5.yaml")],
                          capture_output=True, text=True, timeout=120, check=True)
    modules = json.loads(done.stdout)
    assert "tuner.space" in modules  # the check would be empty otherwise
    host_layer = [m for m in modules if m.split(".")[0] in ("paramiko", "fabric", "invoke")
                  or m == "tuner.host" or m.startswith(("tuner.host.", "tuner.lifecycle"))]
    assert host_layer == []
