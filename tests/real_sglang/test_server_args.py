"""Every flag and value a shipped SGLang search space can put on a command line, parsed by SGLang
0.5.9's own argument parser (``ServerArgs.add_cli_args`` of the real ``server_args.py``)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import optuna
import yaml
import pytest

from tests.real_sglang.conftest import REPO
from tests.real_sglang.server_args import StrictParser, server_args_parser
from tests.support.space_configs import configurations, server_flags, values_of  # noqa: F401
from tuner.space import load_space

SGLANG_SPACES = [path for path in sorted((REPO / "search_spaces").glob("*.yaml"))
                 if load_space(path).engine == "sglang"]


@pytest.fixture(scope="module")
def parser(real_sglang: Path) -> StrictParser:
    return server_args_parser(real_sglang)


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


def _real_config_merger(package: Path, parser: StrictParser) -> Any:
    """SGLang 0.5.9's own ``ConfigArgumentMerger`` (``srt/server_args_config_parser.py``, which
    imports only argparse, logging, pathlib, typing and yaml), as ``prepare_server_args`` makes it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "sglang_0_5_9_config_parser", package / "srt" / "server_args_config_parser.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ConfigArgumentMerger(parser)


def test_secret_flags_reach_sglang_through_its_own_config_merger(
    parser: StrictParser, real_sglang: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tuner's launch (ordinary flags on the command line, secrets in the ``--config`` file
    it writes) parsed as SGLang 0.5.9's ``prepare_server_args`` parses it."""
    from tuner.space._launch import secret_flags_yaml

    document = yaml.safe_load((REPO / "search_spaces/glm5.yaml").read_text())
    document["server"]["flags"].update({
        "--api-key": "${TUNER_TEST_API_KEY}", "--admin-api-key": "admin-literal-secret",
        "--max-total-tokens": 200000, "--max-prefill-tokens": 16384,
        "--tokenizer-path": "/models/GLM-5-tokenizer", "--skip-tokenizer-init": True,
        "--speculative-token-map": "/models/GLM-5-token-map.pt",
    })
    path = tmp_path / "glm5.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    monkeypatch.setenv("TUNER_TEST_API_KEY", "sk-real-sglang-0a1b")
    space = load_space(path)
    launch = space.render(space.baseline)
    config = tmp_path / "secret-flags.yaml"
    config.write_text(secret_flags_yaml(launch.secret_flags))
    argv = launch.argv[len(shlex.split(space.command)):] + ["--config", str(config)]
    parsed = parser.parse_args(_real_config_merger(real_sglang, parser).merge_config_with_args(argv))
    assert (parsed.api_key, parsed.admin_api_key) == ("sk-real-sglang-0a1b", "admin-literal-secret")
    assert (parsed.max_total_tokens, parsed.max_prefill_tokens) == (200000, 16384)
    assert (parsed.tokenizer_path, parsed.skip_tokenizer_init) == ("/models/GLM-5-tokenizer", True)
    assert parsed.speculative_token_map == "/models/GLM-5-token-map.pt"
    assert parsed.trust_remote_code is True


def test_the_config_file_gives_each_value_in_sglangs_own_form(
    parser: StrictParser, real_sglang: Path, tmp_path: Path
) -> None:
    """A boolean is a YAML boolean (the merger turns ``true`` into the bare flag, a string
    ``"true"`` into ``--flag true``, which the parser refuses), numbers and lists as such."""
    from tuner.space._launch import secret_flags_yaml

    config = tmp_path / "secret-flags.yaml"
    config.write_text(secret_flags_yaml({"--api-key": "sk-1234", "--enable-metrics": True,
                                         "--max-total-tokens": 4096, "--cuda-graph-bs": [1, 2, 4]}))
    merger = _real_config_merger(real_sglang, parser)
    argv = merger.merge_config_with_args(["--model-path", "/models/m", "--config", str(config)])
    parsed = parser.parse_args(argv)
    assert (parsed.api_key, parsed.enable_metrics, parsed.max_total_tokens) == ("sk-1234", True, 4096)
    assert parsed.cuda_graph_bs == [1, 2, 4]
    config.write_text('enable-metrics: "true"\n')  # what a boolean must never become
    with pytest.raises(ValueError):
        parser.parse_args(merger.merge_config_with_args(["--model-path", "/m", "--config", str(config)]))


def test_sampled_configurations_with_the_new_dimensions_parse(parser: StrictParser) -> None:
    """Random glm5 configurations (parallelism and speculation active in many), those the
    constraints and ``fit:`` let run, all parse with SGLang 0.5.9's own parser."""
    space = load_space(REPO / "search_spaces/glm5.yaml")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=29))
    parsed_new = 0
    for _ in range(200):
        config = space.suggest(study.ask())
        if any(v.action == "skip" for v in space.constraint_violations(config)):
            continue
        argv = server_flags(space, config)
        try:
            parsed = parser.parse_args(argv)
        except ValueError as error:
            pytest.fail(f"SGLang 0.5.9 refuses {shlex.join(argv)}: {error}")
        parsed_new += parsed.speculative_algorithm == "NEXTN" or parsed.enable_dp_attention
    assert parsed_new >= 25  # about two in three samples have tp 4 or 6, refused by fit:


def test_the_emulators_refusals_are_sglangs_own_text(real_sglang: Path) -> None:
    """The messages the emulator and glm5.yaml give for SGLang's rules are the wheel's."""
    source = (real_sglang / "srt" / "server_args.py").read_text()
    for text in ("When enabling two batch overlap, moe_a2a_backend cannot be 'none'.",
                 "speculative_eagle_topk > 1 with page_size > 1 is unstable",
                 "self.max_running_requests = 48", 'self.speculative_algorithm = "EAGLE"',
                 "assert self.tp_size % self.dp_size == 0",
                 "self.schedule_conservativeness = self.schedule_conservativeness * 0.3",
                 "return (3, 1, 4)"):
        assert text in source, text
    model = (real_sglang / "srt" / "models" / "deepseek_v2.py").read_text()
    assert "assert num_heads % attn_tp_size == 0" in model
    metrics = (real_sglang / "srt" / "managers" / "scheduler_metrics_mixin.py").read_text()
    assert 'accept len: {spec_accept_length:.2f}, accept rate: {spec_accept_rate:.2f}, ' in metrics
