"""The README's test command is what `.ci/run` runs, word for word."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_readme_s_test_command_is_what_ci_run_runs() -> None:
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
          if line.startswith("bash .ci/install")]
    assert len(ci) == 1, ci
    command = ci[0]
    assert command.startswith("bash .ci/install && python3 -m pytest -q")
    readme = (REPO / "README.md").read_text()
    quick_start = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    assert any(line.split("  #")[0].rstrip() == command for line in quick_start.splitlines()), \
        f"README's first code block does not run {command!r}"
    assert f"`{command}` (what `.ci/run` runs" in readme
