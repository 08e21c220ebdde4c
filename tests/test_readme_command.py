"""The README's demo and test commands are what `.ci/run` runs, word for word and in that order."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_readme_s_test_command_is_what_ci_run_runs() -> None:
    ci = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
          if line.startswith("bash .ci/install")]
    assert len(ci) == 1, ci
    command = ci[0]
    assert command.startswith("bash .ci/install && bash .ci/lint && python3 -m pytest -q")
    readme = (REPO / "README.md").read_text()
    quick_start = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    assert any(line.split("  #")[0].rstrip() == command for line in quick_start.splitlines()), \
        f"README's first code block does not run {command!r}"
    assert f"`{command}` (what `.ci/run` runs" in readme


def test_ci_run_runs_the_readme_s_demo_before_the_tests() -> None:
    readme = (REPO / "README.md").read_text()
    quick_start = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    demo = quick_start.splitlines()[0].split("  #")[0].rstrip()
    assert "tuner optimize" in demo and "--emulate" in demo, demo
    lines = (REPO / ".ci" / "run").read_text().splitlines()
    assert demo in lines, f".ci/run does not run the README's demo {demo!r}"
    tests = next(i for i, line in enumerate(lines) if line.startswith("bash .ci/install"))
    assert lines.index(demo) < tests  # the tests run beside what the demo left in studies/
