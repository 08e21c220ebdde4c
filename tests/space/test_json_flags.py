"""A JSON-valued flag (vLLM's ``--speculative-config``) composed from structured parameters."""

from __future__ import annotations

import shlex

import pytest

from tests.support.space import REPO, small_space
from tuner.errors import ConfigError
from tuner.space import load_space
from tuner.space._space import _param_payload

SPECULATIVE = REPO / "search_spaces" / "vllm-cpu-speculative.yaml"


def _spec_params() -> dict:
    return {
        "method": {"kind": "categorical", "flag": "--speculative-config", "json_key": "method",
                   "choices": ["ngram", "suffix"], "unset": True},
        "tokens": {"kind": "int", "flag": "--speculative-config", "json_key": "num_speculative_tokens",
                   "low": 2, "high": 6, "when": {"method": "ngram"}},
    }


def test_the_keys_of_active_parameters_make_one_quoted_json_argument() -> None:
    space = load_space(SPECULATIVE)
    config = space.config({"max_num_seqs": 2, "data_parallel_size": 2, "speculative_method": "ngram",
                           "num_speculative_tokens": 5, "prompt_lookup_max": 2})
    launch = space.render(config)
    assert launch.argv[-4:] == ["--data-parallel-size", "2", "--speculative-config",
                                '{"method":"ngram","num_speculative_tokens":5,"prompt_lookup_max":2}']
    assert shlex.split(launch.command_line) == launch.argv  # quoted once, read back whole


def test_no_active_key_leaves_the_flag_out() -> None:
    space = load_space(SPECULATIVE)
    launch = space.render(space.baseline)
    assert "--speculative-config" not in launch.argv and "--data-parallel-size" not in launch.argv


def test_a_value_with_shell_characters_stays_one_argument(write_space) -> None:
    params = _spec_params()
    params["method"]["choices"] = ["ngram", "n'gram $(x)"]
    space = load_space(write_space(small_space(params, {"method": None})))
    launch = space.render(space.config({"method": "n'gram $(x)"}))
    assert shlex.split(launch.command_line)[-1] == '{"method":"n\'gram $(x)"}'


def test_a_key_given_twice_is_one_line_naming_the_field(write_space) -> None:
    params = _spec_params()
    params["other"] = {**params["method"], "choices": ["eagle"]}
    path = write_space(small_space(params, {"method": None, "other": None}))
    with pytest.raises(ConfigError, match=r"parameters\.other\.json_key: --speculative-config key 'method' "
                                          r"is also given by parameters\.method; fix: give each key"):
        load_space(path)


def test_a_plain_parameter_on_a_json_flag_is_refused(write_space) -> None:
    params = {**_spec_params(), "plain": {"kind": "categorical", "flag": "--speculative-config",
                                          "choices": ["{}"]}}
    path = write_space(small_space(params, {"method": None, "plain": "{}"}))
    with pytest.raises(ConfigError, match=r"parameters\.plain\.flag: --speculative-config is also given"):
        load_space(path)


def test_json_key_needs_a_flag(write_space) -> None:
    params = {"x": {"kind": "int", "env": "X", "json_key": "x", "low": 1, "high": 2}}
    with pytest.raises(ConfigError, match=r"json_key: json_key 'x' needs a flag"):
        load_space(write_space(small_space(params, {"x": 1})))


def test_spaces_without_json_keys_keep_their_fingerprint() -> None:
    """The field left out of the fingerprint when unset: studies made before it resume."""
    space = load_space(REPO / "search_spaces" / "vllm-cpu-tiny.yaml")
    dumped = space.model.parameters["max_num_seqs"].model_dump()
    assert dumped["json_key"] is None
    assert "json_key" not in _param_payload(space.model.parameters["max_num_seqs"])
