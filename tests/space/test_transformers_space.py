"""search_spaces/transformers-h200.yaml: it loads, every command line it renders is one the real
``transformers serve`` 5.17 takes (checked against its captured ``--help``), the model comes from
the environment, and ``tuner optimize --dry-run`` runs without a GPU or the model."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from tuner.errors import ConfigError
from tuner.space import load_space

REPO = Path(__file__).resolve().parents[2]
SPACE = REPO / "search_spaces/transformers-h200.yaml"
HELP = REPO / "tests/fixtures/transformers/serve-help.txt"
MODEL = "/tmp/model"


def _help_options() -> dict[str, str]:
    """Every option of the captured help -> its type word (TEXT, INTEGER, FLOAT; "" for a bare
    flag, both sides of a ``--x / --no-x`` pair)."""
    options: dict[str, str] = {}
    for line in HELP.read_text().splitlines():
        found = re.match(r"\s+(--[a-z0-9-]+)(?: / (--[a-z0-9-]+))?(?: ([A-Z]+))?(?:\s|$)", line)
        if found:
            options[found.group(1)] = found.group(3) or ""
            if found.group(2):
                options[found.group(2)] = ""
    return options


def _check_argv(argv: list[str], options: dict[str, str]) -> None:
    """The command line is ``transformers serve MODEL`` and options the help lists, each bare
    flag alone and each valued option followed by a value of its type."""
    assert argv[:3] == ["transformers", "serve", MODEL], argv
    rest = argv[3:]
    while rest:
        flag = rest.pop(0)
        assert flag in options, f"{flag} is not an option of transformers serve 5.17"
        kind = options[flag]
        if not kind:
            assert not rest or rest[0].startswith("--"), f"{flag} is a bare flag: {argv}"
            continue
        value = rest.pop(0)
        if kind == "INTEGER":
            int(value)
        elif kind == "FLOAT":
            assert 0.0 <= float(value) <= 1.0, f"{flag} {value}: a fraction (0.0-1.0)"


def test_every_rendered_command_line_is_accepted_by_transformers_serve(monkeypatch) -> None:
    monkeypatch.setenv("TUNER_MODEL_DIR", MODEL)
    space = load_space(SPACE)
    options = _help_options()
    assert {"--continuous-batching", "--no-cb-use-cuda-graph", "--cb-max-memory-percent"} <= set(options)
    assert set(space.flags()) <= set(options)
    baseline = space.render(space.baseline).argv
    assert baseline == ["transformers", "serve", MODEL, "--host", "127.0.0.1", "--port", "8000",
                        "--dtype", "bfloat16", "--continuous-batching"]
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    seen: set[str] = set()
    for _ in range(200):
        trial = study.ask()
        config = space.suggest(trial)
        argv = space.render(config).argv
        _check_argv(argv, options)
        if "--continuous-batching" not in argv:  # the --cb-* flags act on it only
            assert not [a for a in argv if a.startswith(("--cb-", "--no-cb-"))], argv
        seen.update(a for a in argv if a.startswith("--"))
        study.tell(trial, 0.0)
    assert set(space.flags()) <= seen  # every flag was rendered at least once


def test_the_space_speaks_strict_openai_and_names_the_model_by_its_path(monkeypatch) -> None:
    monkeypatch.setenv("TUNER_MODEL_DIR", MODEL)
    space = load_space(SPACE)
    assert space.profile.name == "transformers" and space.profile.request_extensions == []
    assert space.served_model_name() == MODEL
    workload = space.workload_for(False)
    assert (workload.api, workload.levels, workload.input_len, workload.output_len) == (
        "openai", [1, 16, 64], 128, 128)
    assert space.probe.max_tokens <= 4  # eager attention's 8th token differs (a bf16 near-tie)


def test_an_unset_model_variable_is_one_line_naming_the_field_and_the_fix(monkeypatch) -> None:
    monkeypatch.delenv("TUNER_MODEL_DIR", raising=False)
    space = load_space(SPACE)  # loading needs no model
    with pytest.raises(ConfigError) as caught:
        space.render(space.baseline)
    message = str(caught.value)
    line = next(n for n, text in enumerate(SPACE.read_text().splitlines(), 1)
                if text.strip().startswith("model_path:"))
    assert message.startswith(f"{SPACE}:{line}: server.model_path: ")
    assert "${TUNER_MODEL_DIR} is not set" in message and "export TUNER_MODEL_DIR=" in message
    assert "\n" not in message


def _tuner(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=tmp_path, text=True,
                          capture_output=True, timeout=120, stdin=subprocess.DEVNULL,
                          env={**env, "HOME": str(home)}, check=False)


def test_dry_run_works_without_a_gpu_or_the_model(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TUNER_MODEL_DIR"}
    done = _tuner(tmp_path, "optimize", str(SPACE), "--dry-run", "--trials", "6", env=env)
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("trial ")]
    assert lines and all("transformers serve '${TUNER_MODEL_DIR}' --host 127.0.0.1 --port 8000"
                         in ln for ln in lines)
    baseline = [ln for ln in done.stdout.splitlines() if ln.startswith("baseline: ")]
    assert len(baseline) == 1 and baseline[0].endswith("--dtype bfloat16 --continuous-batching")
    assert not (tmp_path / "studies").exists()  # nothing stored, no server started


def test_a_real_run_without_the_model_variable_stops_before_any_server(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TUNER_MODEL_DIR"}
    done = _tuner(tmp_path, "optimize", str(SPACE), "--trials", "1", env=env)
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(errors) == 1 and "server.model_path" in errors[0], done.stderr
    assert "export TUNER_MODEL_DIR=" in errors[0]
    assert not (tmp_path / "studies").exists()  # stopped before the study was made


def test_an_exported_command_line_expands_the_model_path_in_bash() -> None:
    """The model path '${TUNER_MODEL_DIR}' is quoted so bash expands it: in single quotes the
    launch script would pass that text to the server instead of the folder (the H200 study's
    export)."""
    import subprocess

    from tuner.space import LaunchSpec

    words = ["transformers", "serve", "${TUNER_MODEL_DIR}", "--dtype", "bfloat16", "it's"]
    line = LaunchSpec.shell_join(words)
    assert '"${TUNER_MODEL_DIR:?}"' in line
    echo = subprocess.run(["bash", "-c", f"printf '%s\\n' {line}"], capture_output=True, text=True,
                          env={"TUNER_MODEL_DIR": "/models/my model", "PATH": "/usr/bin:/bin"})
    assert echo.stdout.splitlines() == ["transformers", "serve", "/models/my model", "--dtype",
                                        "bfloat16", "it's"]
    unset = subprocess.run(["bash", "-c", f"printf '%s\\n' {line}"], capture_output=True,
                           text=True, env={"PATH": "/usr/bin:/bin"})
    assert unset.returncode != 0 and "TUNER_MODEL_DIR" in unset.stderr
