"""Reading a launch command: the engine, its program, environment, model and flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.errors import ConfigError
from tuner.init._command import CommandFlag, read_flags, recognise
from tuner.init._help import EngineFlags, FlagInfo, parse_help

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.parametrize("words, engine, program", [
    ("python -m sglang.launch_server --model-path /m", "sglang", ("python", "-m", "sglang.launch_server")),
    ("/opt/venv/bin/python3.12 -m sglang.launch_server --model-path /m", "sglang",
     ("/opt/venv/bin/python3.12", "-m", "sglang.launch_server")),
    ("sglang serve --model-path /m", "sglang", ("sglang", "serve")),
    ("vllm serve /m --max-num-seqs 8", "vllm", ("vllm", "serve")),
    ("python3 -m vllm.entrypoints.openai.api_server --model /m", "vllm",
     ("python3", "-m", "vllm.entrypoints.openai.api_server")),
    ("transformers serve /m --continuous-batching", "transformers", ("transformers", "serve")),
])
def test_the_five_forms_are_recognised(words: str, engine: str, program: tuple[str, ...]) -> None:
    recognised = recognise(words.split())
    assert (recognised.engine, recognised.program) == (engine, program)
    assert read_flags(recognised).model == "/m"


def test_environment_words_before_the_program_are_kept() -> None:
    recognised = recognise(["HF_HUB_OFFLINE=1", "env", "VLLM_CPU_KVCACHE_SPACE=2", "vllm", "serve", "/m"])
    assert recognised.env == {"HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "2"}
    assert recognised.python is None


def test_flags_read_with_the_engines_own_flag_list() -> None:
    recognised = recognise(["python", "-m", "sglang.launch_server", "--model", "/m", "--trust-remote-code", "--tp-size=8", "--cuda-graph-bs", "1", "2", "4", "--chunked-prefill-size", "-1", "--disable-cuda-graph"])
    command = read_flags(recognised, EngineFlags({"--trust-remote-code": FlagInfo(False),
                                                     "--disable-cuda-graph": FlagInfo(False)}))
    assert (command.model, command.model_flag) == ("/m", "--model")
    assert command.flags == (CommandFlag("--trust-remote-code"), CommandFlag("--tp-size", "8"),
                             CommandFlag("--cuda-graph-bs", ("1", "2", "4")),
                             CommandFlag("--chunked-prefill-size", "-1"), CommandFlag("--disable-cuda-graph"))


def test_a_switch_is_not_given_the_next_word() -> None:
    """`transformers serve --continuous-batching MODEL` would read MODEL as the flag's value
    without the help's word that --continuous-batching takes none."""
    flags = parse_help((FIXTURES / "transformers" / "serve-help.txt").read_text())
    command = read_flags(recognise(["transformers", "serve", "/m", "--compile", "--cb-block-size", "64"]),
                         flags)
    assert command.flags == (CommandFlag("--compile"), CommandFlag("--cb-block-size", "64"))


@pytest.mark.parametrize("words", ["", "python -m http.server 8000", "vllm bench --model m", "docker run x"])
def test_an_unknown_command_is_refused_with_the_forms_understood(words: str) -> None:
    with pytest.raises(ConfigError) as error:
        recognise(words.split())
    assert error.value.exit_code == 2
    assert "; fix: " in str(error.value)


def test_a_stray_word_is_refused() -> None:
    with pytest.raises(ConfigError, match="follows no flag"):
        read_flags(recognise(["sglang", "serve", "/m", "--model-path", "/m"]))
