"""The command line follows typer/click conventions: ``--version``, ``-h`` on every command, a
bare ``tuner`` prints its help and succeeds, choices listed in the help and checked by the parser,
help text as written (brackets kept, no reST markup), ``SPACE`` in usage lines, shell completion."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tuner import __version__
from tuner.cli import app
from tuner.cli_options import SAMPLER_NAMES

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ["optimize", "export", "doctor", "enqueue", "validate", "dashboard", "bench", "best",
            "report", "trials"]


def tuner(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tuner", *args], capture_output=True, text=True,
                          timeout=60, check=False, env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"})


def help_of(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "-h"], prog_name="tuner", env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return result.output


def test_version_and_bare_tuner() -> None:
    done = tuner("--version")
    assert (done.returncode, done.stdout) == (0, f"tuner {__version__}\n")
    bare = tuner()
    assert bare.returncode == 0 and bare.stderr == ""
    assert bare.stdout.startswith("Usage: tuner [OPTIONS] COMMAND") and all(c in bare.stdout for c in COMMANDS)
    assert "--install-completion" in bare.stdout  # shell completion, typer's own


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_takes_dash_h_and_reads_as_written(command: str) -> None:
    text = help_of(command)
    assert text.startswith(f"Usage: tuner {command} [OPTIONS]")
    assert "``" not in text and ":class:" not in text  # no reST markup
    if command != "bench":
        assert "{SPACE}" in text.splitlines()[0]  # the argument named as the README names it
    long = CliRunner().invoke(app, [command, "--help"], prog_name="tuner", env={"COLUMNS": "200"})
    assert long.output == text  # -h is --help
    assert "Options:" in text and "╭" not in text  # one style: click's sections, no rich panels


def test_host_help_keeps_its_brackets_and_choices_are_listed() -> None:
    optimize = help_of("optimize")
    assert "[user@]address[:port] or local" in optimize
    assert "<guided|tpe|random|one-at-a-time>" in optimize
    bench = help_of("bench")
    assert "<sglang|openai|openai-chat>" in bench and "<poisson|constant>" in bench


def test_the_sampler_choices_are_optuna_s_samplers() -> None:
    from tuner.study.strategies import SAMPLERS

    assert SAMPLER_NAMES == SAMPLERS
