"""The levels a written space measures at: --levels, else the command's cap and 4x above it."""

from __future__ import annotations

import pytest

from tuner.errors import ConfigError
from tuner.init._command import read_flags, recognise
from tuner.init._workload import DEFAULT_LEVELS, choose_levels


def _command(text: str):
    return read_flags(recognise(text.split()))


def test_the_commands_cap_and_a_level_above_it() -> None:
    assert choose_levels(_command("python3 -m sglang.launch_server --max-running-requests 64"), None).levels == [64, 256]
    assert choose_levels(_command("vllm serve /m --max-num-seqs 2"), None).levels == [2, 8]


def test_no_cap_assumes_levels_and_says_so() -> None:
    chosen = choose_levels(_command("transformers serve /m"), None)
    assert chosen.levels == DEFAULT_LEVELS and "assumed" in chosen.why


def test_given_levels_win() -> None:
    assert choose_levels(_command("vllm serve /m --max-num-seqs 2"), "4,16,64").levels == [4, 16, 64]


@pytest.mark.parametrize("text", ["64,16", "0,4", "a,b", "4,4"])
def test_bad_levels_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="; fix: give e.g. --levels 64,256,1024"):
        choose_levels(_command("vllm serve /m"), text)
