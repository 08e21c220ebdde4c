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
