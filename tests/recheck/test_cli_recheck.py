"""`tuner recheck`'s bad input: one line, exit 2, before the host (here: the emulated host's
folder) is touched."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_study_that_is_not_there_is_one_line_and_exit_2(tmp_path: Path) -> None:
    shutil.copy(REPO / "search_spaces" / "glm5.yaml", tmp_path / "glm5.yaml")
    done = subprocess.run([sys.executable, "-m", "tuner", "recheck", "glm5.yaml", "--emulate"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith("tuner: error: no study database at studies/glm5-emulated.db")
    assert len(done.stderr.strip().splitlines()) == 1 and "fix:" in done.stderr
    assert not (tmp_path / "studies").exists()  # no emulated host made, nothing started
