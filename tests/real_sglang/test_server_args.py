"""Every flag and value a shipped SGLang search space can put on a command line, parsed by SGLang
0.5.9's own argument parser (``ServerArgs.add_cli_args`` of the real ``server_args.py``)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import optuna
import pytest

from tests.real_sglang.conftest import REPO
from tests.real_sglang.server_args import StrictParser, server_args_parser
from tuner.space import Config, SearchSpace, load_space

SGLANG_SPACES = [path for path in sorted((REPO / "search_spaces").glob("*.yaml"))
                 if load_space(path).engine == "sglang"]


@pytest.fixture(scope="module")
def parser(real_sglang: Path) -> StrictParser:
    return server_args_parser(real_sglang)


def values_of(param: Any) -> list[Any]:
    """The values worth trying: each option, or both ends of a range (and unset)."""
    if hasattr(param, "low") and hasattr(param, "high"):
        return [param.low, param.high] + ([None] if getattr(param, "unset", False) else [])
    return list(param.options())


def configurations(space: SearchSpace) -> list[tuple[str, Config]]:
    """The baseline, then for each parameter and each of its values a configuration where the
    parameter is active with that value (the baseline changed, or a sampled one where the
    baseline makes the parameter inactive)."""
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    sampled = [space.suggest(study.ask()) for _ in range(200)]
    found = [("baseline", space.baseline)]
    for name, param in space.parameters.items():
        base = space.baseline if name in space.baseline else next(
            (c for c in sampled if name in c), None)
        assert base is not None, f"{name}: never active in 200 sampled configurations"
        filler = {other: values_of(spec)[0] for other, spec in space.parameters.items()}
        for value in values_of(param):  # a parameter it turns on takes its first value
            config = space.config({**filler, **base, name: value}, drop_inactive=True)
            assert name in config and config[name] == value, (name, value)
            found.append((f"{name}={value}", config))
    return found


def server_flags(space: SearchSpace, config: Config) -> list[str]:
    """The rendered command line without the server command (what launch_server parses)."""
    argv = space.render(config, resolve=False).argv
    command = shlex.split(space.command)
    assert argv[:len(command)] == command
    return argv[len(command):]


def test_there_is_an_sglang_space_to_check() -> None:
    assert [path.name for path in SGLANG_SPACES] == ["glm5.yaml"]


@pytest.mark.parametrize("path", SGLANG_SPACES, ids=lambda p: p.name)
def test_every_rendered_command_line_parses(parser: StrictParser, path: Path) -> None:
    space = load_space(path)
    checked = 0
    for label, config in configurations(space):
        argv = server_flags(space, config)
        try:
            parsed = parser.parse_args(argv)
        except ValueError as error:
            pytest.fail(f"{path.name}: {label}: SGLang 0.5.9 refuses {shlex.join(argv)}: {error}")
        assert parsed.port == space.server.port
        checked += 1
    assert checked > len(space.parameters)


@pytest.mark.parametrize("path", SGLANG_SPACES, ids=lambda p: p.name)
def test_every_flag_of_the_space_is_one_sglang_knows(parser: StrictParser, path: Path) -> None:
    known = {option for action in parser._actions for option in action.option_strings}
    unknown = [flag for flag in load_space(path).flags() if flag not in known]
    assert not unknown, f"{path.name}: flags SGLang 0.5.9 does not have: {unknown}"


def test_the_parser_refuses_what_sglang_refuses(parser: StrictParser) -> None:
    base = ["--model-path", "/models/m"]
    for bad in (["--no-such-flag"], ["--moe-runner-backend", "cutlass_typo"],
                ["--kv-cache-dtype", "fp8"], ["--tp-size", "eight"]):
        with pytest.raises(ValueError):
            parser.parse_args(base + bad)
    parsed = parser.parse_args(base + ["--moe-runner-backend", "flashinfer_cutlass"])
    assert parsed.moe_runner_backend == "flashinfer_cutlass"
