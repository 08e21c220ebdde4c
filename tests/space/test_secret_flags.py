"""Flags that carry secrets: ``--api-key`` or any value written ``${NAME}`` in ``server.flags``."""

from __future__ import annotations

import pytest

from tuner.errors import ConfigError
from tuner.space import load_space
from tuner.space._launch import secret_flags_yaml


def test_a_referenced_secret_flag_is_resolved_kept_off_argv_and_masked(
    glm5_data, write_space, monkeypatch
) -> None:
    glm5_data["server"]["flags"]["--api-key"] = "${TUNER_TEST_KEY}"
    glm5_data["server"]["flags"]["--admin-api-key"] = "literal-admin-secret"
    space = load_space(write_space(glm5_data))
    monkeypatch.setenv("TUNER_TEST_KEY", "sk-live-123")
    launch = space.render(space.baseline)
    assert launch.secret_flags == {"--api-key": "sk-live-123", "--admin-api-key": "literal-admin-secret"}
    assert "--api-key" not in launch.argv and "sk-live-123" not in " ".join(launch.argv)
    assert launch.command_line.endswith("--api-key '${TUNER_TEST_KEY}' --admin-api-key '***'")
    assert launch.shell_secret_args() == (
        ' --api-key "${TUNER_TEST_KEY:?}" --admin-api-key "${TUNER_SECRET_ADMIN_API_KEY:?}"'
    )
    assert secret_flags_yaml(launch.secret_flags) == (
        'api-key: "sk-live-123"\nadmin-api-key: "literal-admin-secret"\n'
    )


def test_an_unset_secret_is_a_one_line_error(glm5_data, write_space, monkeypatch) -> None:
    glm5_data["server"]["flags"]["--api-key"] = "${TUNER_TEST_UNSET_KEY}"
    path = write_space(glm5_data)
    space = load_space(path)
    monkeypatch.delenv("TUNER_TEST_UNSET_KEY", raising=False)
    with pytest.raises(ConfigError) as error:
        space.render(space.baseline)
    message = str(error.value)
    assert "\n" not in message and str(path) in message and "server.flags.--api-key" in message
    assert "export TUNER_TEST_UNSET_KEY=..." in message
    assert space.render(space.baseline, resolve=False).secret_flags == {
        "--api-key": "${TUNER_TEST_UNSET_KEY}"
    }


ORDINARY = {"--max-total-tokens": 200000, "--max-prefill-tokens": 16384,
            "--tokenizer-path": "/models/GLM-5-tokenizer", "--skip-tokenizer-init": True,
            "--speculative-token-map": "/models/GLM-5-token-map.pt"}


def test_flags_with_token_or_key_in_their_name_are_ordinary_flags(
    glm5_data, write_space, monkeypatch
) -> None:
    glm5_data["server"]["flags"].update(ORDINARY)
    glm5_data["server"]["flags"]["--api-key"] = "${TUNER_TEST_KEY}"
    space = load_space(write_space(glm5_data))
    monkeypatch.setenv("TUNER_TEST_KEY", "sk-live-123")
    launch = space.render(space.baseline)
    assert list(launch.secret_flags) == ["--api-key"] and launch.api_key == "sk-live-123"
    shown = launch.command_line + launch.shell_secret_args()
    for flag, value in ORDINARY.items():  # on the command line, stored and exported as written
        words = [flag] if value is True else [flag, str(value)]
        index = launch.argv.index(flag)
        assert launch.argv[index:index + len(words)] == words
        assert " ".join(words) in shown
    assert "***" not in shown and "TUNER_SECRET_" not in shown


def test_a_flag_is_secret_when_the_engine_lists_it_or_its_value_is_a_reference() -> None:
    from tuner.engines import load_profile
    from tuner.space._launch import is_secret_flag

    sglang, vllm = load_profile("sglang"), load_profile("vllm")
    assert sglang.secret_flags == ["--api-key", "--admin-api-key"]
    assert (sglang.api_key_flag, vllm.secret_flags, vllm.api_key_flag) == (
        "--api-key", ["--api-key"], "--api-key")
    assert is_secret_flag("--admin-api-key", "literal", sglang.secret_flags)
    assert not is_secret_flag("--admin-api-key", "literal", vllm.secret_flags)
    assert is_secret_flag("--served-model-name", "${MODEL_NAME}", sglang.secret_flags)
    for flag, value in ORDINARY.items():
        assert not is_secret_flag(flag, value, sglang.secret_flags)


def test_a_profile_whose_api_key_flag_is_not_a_secret_flag_is_refused() -> None:
    from pydantic import ValidationError

    from tuner.engines import EngineProfile, load_profile

    data = load_profile("sglang").model_dump()
    with pytest.raises(ValidationError, match="api_key_flag: --api-key is not in secret_flags"):
        EngineProfile.model_validate({**data, "secret_flags": ["--admin-api-key"]})


def test_a_literal_secret_keeps_its_yaml_type_in_the_config_file(
    glm5_data, write_space
) -> None:
    glm5_data["server"]["flags"]["--admin-api-key"] = 12345678
    space = load_space(write_space(glm5_data))
    launch = space.render(space.baseline)
    assert launch.secret_flags == {"--admin-api-key": 12345678} and launch.api_key is None
    assert secret_flags_yaml({**launch.secret_flags, "--enable-metrics": True,
                              "--cuda-graph-bs": [1, 2]}) == (
        "admin-api-key: 12345678\nenable-metrics: true\ncuda-graph-bs: [1, 2]\n")
