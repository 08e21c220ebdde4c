"""Rendering: every parameter kind, conditions, quoting, the environment and its secrets."""

from __future__ import annotations

import subprocess
from itertools import pairwise

import pytest

from tests.support.space import small_space
from tuner.errors import ConfigError
from tuner.space import MASK, load_space


def _pairs(argv: list[str]) -> list[tuple[str, str]]:
    return list(pairwise(argv))


@pytest.fixture
def kinds_space(write_space):
    """One parameter of every kind."""
    parameters = {
        "backend": {"kind": "categorical", "flag": "--moe-runner-backend",
                    "choices": ["auto", "triton", 7, 2.5, True]},
        "gate": {"kind": "patch", "patch": "gate_patch", "when": {"backend": "triton"}},
        "running": {"kind": "int", "flag": "--max-running-requests", "low": 64, "high": 2048,
                    "log": True, "unset": True},
        "chunk": {"kind": "int", "flag": "--chunked-prefill-size", "low": 1024, "high": 8192,
                  "step": 1024},
        "fraction": {"kind": "float", "flag": "--mem-fraction-static", "low": 0.85,
                     "high": 0.96, "step": 0.01},
        "radix_off": {"kind": "store_true", "flag": "--disable-radix-cache"},
        "graphs": {"kind": "bool", "flag": "--disable-cuda-graph", "when_false": True},
        "prefill": {"kind": "paired", "flag": "--enable-chunked-prefill", "unset": True},
        "overlap": {"kind": "paired", "flag": "--overlap", "negative_flag": "--disable-overlap"},
        "health": {"kind": "categorical", "env": "SGLANG_HEALTH", "choices": ["0", "1", True],
                   "unset": True},
        "graph_bs": {"kind": "categorical", "flag": "--cuda-graph-max-bs", "choices": [64, 128],
                     "when": {"graphs": True}},
    }
    baseline = {"backend": "auto", "running": 64, "chunk": 2048, "fraction": 0.92,
                "radix_off": False, "graphs": True, "prefill": None, "overlap": True,
                "health": None, "graph_bs": 64}
    patches = {"gate_patch": {"file": "srt/x.py", "find": "a = 1", "replace": "a = 2"}}
    return load_space(write_space(small_space(parameters, baseline, patches=patches)))


def test_baseline_renders_only_what_is_set(kinds_space):
    spec = kinds_space.render(kinds_space.baseline)
    assert spec.argv == [
        "python3", "-m", "sglang.launch_server", "--host", "127.0.0.1", "--port", "30000",
        "--model-path", "/models/m",
        "--moe-runner-backend", "auto", "--max-running-requests", "64",
        "--chunked-prefill-size", "2048", "--mem-fraction-static", "0.92",
        "--overlap", "--cuda-graph-max-bs", "64",
    ]
    assert spec.patches == frozenset()
    assert "SGLANG_HEALTH" not in spec.env


def test_every_kind_rendered(kinds_space):
    config = kinds_space.config({
        "backend": "triton", "gate": True, "running": None, "chunk": 4096, "fraction": 0.9,
        "radix_off": True, "graphs": False, "prefill": False, "overlap": False, "health": True,
    })
    spec = kinds_space.render(config)
    argv = spec.argv
    assert ("--moe-runner-backend", "triton") in _pairs(argv)
    assert "--max-running-requests" not in argv          # unset: the flag is omitted
    assert ("--chunked-prefill-size", "4096") in _pairs(argv)
    assert ("--mem-fraction-static", "0.9") in _pairs(argv)
    # store_true and bool(when_false) are bare flags: the next token is another flag
    for bare in ("--disable-radix-cache", "--disable-cuda-graph", "--no-enable-chunked-prefill",
                 "--disable-overlap"):
        index = argv.index(bare)
        assert index == len(argv) - 1 or argv[index + 1].startswith("--")
    assert "--enable-chunked-prefill" not in argv and "--overlap" not in argv
    assert "--cuda-graph-max-bs" not in argv             # inactive: graphs are off
    assert "graph_bs" not in config
    assert spec.env["SGLANG_HEALTH"] == "1"              # a boolean choice as a variable
    assert "SGLANG_HEALTH" not in " ".join(argv)
    assert spec.patches == frozenset({"gate_patch"})
    assert "gate" not in " ".join(argv)


def test_mixed_type_choices_render_as_text(kinds_space):
    for value, text in ((7, "7"), (2.5, "2.5"), (True, "true")):
        config = kinds_space.config({**kinds_space.baseline, "backend": value})
        assert ("--moe-runner-backend", text) in _pairs(kinds_space.render(config).argv)


def test_patch_only_when_its_condition_holds(kinds_space):
    off = kinds_space.config({**kinds_space.baseline, "backend": "triton", "gate": False})
    assert kinds_space.render(off).patches == frozenset()
    assert "gate" not in kinds_space.baseline            # backend auto: the patch is inactive
    with pytest.raises(ConfigError, match=r"config\.gate: is inactive here"):
        kinds_space.config({**kinds_space.baseline, "gate": True})


def test_command_and_port_overrides(kinds_space):
    spec = kinds_space.render(kinds_space.baseline, command="'/opt/my venv/bin/python' -m x",
                              port=31001)
    assert spec.argv[:3] == ["/opt/my venv/bin/python", "-m", "x"]
    assert ("--port", "31001") in _pairs(spec.argv)


def test_default_command_comes_from_the_engine_profile(write_space):
    data = small_space({"x": {"kind": "store_true", "flag": "--x"}}, {"x": False})
    del data["server"]["command"]
    space = load_space(write_space(data))
    assert space.render(space.baseline).argv[:3] == ["python3", "-m", "sglang.launch_server"]


def test_fixed_flags_bare_lists_and_omitted(write_space):
    data = small_space({"x": {"kind": "store_true", "flag": "--x"}}, {"x": True})
    data["server"]["flags"].update({"--trust-remote-code": True, "--disable-foo": False,
                                    "--cuda-graph-bs": [1, 2, 4], "--tp-size": 8})
    space = load_space(write_space(data))
    spec = space.render(space.baseline)
    tail = spec.argv[spec.argv.index("/models/m") + 1:]
    assert tail == ["--trust-remote-code", "--cuda-graph-bs", "1", "2", "4", "--tp-size", "8",
                    "--x"]


def test_shell_metacharacters_reach_the_server_unchanged(write_space, tmp_path):
    marker = tmp_path / "pwned"
    nasty = [f"x'; touch {marker} #", "$(touch " + str(marker) + ")", "`id`", 'a "b" c',
             "semi;colon && and", "new\nline"]
    data = small_space(
        {"name": {"kind": "categorical", "flag": "--served-model-name", "choices": nasty}},
        {"name": nasty[0]},
    )
    space = load_space(write_space(data))
    for value in nasty:
        spec = space.render(space.config({"name": value}))
        # What a user does with command_line: paste it into a shell.
        shown = subprocess.run(["bash", "-c", "printf '%s\\0' " + spec.command_line],
                               capture_output=True, text=True, check=True).stdout
        assert shown.split("\0")[:-1] == spec.argv
        assert ("--served-model-name", value) in _pairs(spec.argv)
    assert not marker.exists()


def test_secrets_masked_and_exported_as_references(write_space, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token_123")
    monkeypatch.setenv("MY_PASSWORD", "pw-xyz-789")
    data = small_space({"x": {"kind": "store_true", "flag": "--x"}}, {"x": False})
    data["server"]["env"] = {
        "HF_TOKEN": "${HF_TOKEN}",            # a secret by name, from the tuner's environment
        "DB_URL": "postgres://u:${MY_PASSWORD}@db/x",  # not secret by name, but refers to one
        "API_KEY": "literal-key-456",         # a secret written into the file
        "CACHE": "/tmp/cache dir",            # plain
    }
    space = load_space(write_space(data))
    spec = space.render(space.baseline)
    assert spec.env["HF_TOKEN"] == "hf_not_a_real_token_123"
    assert spec.env["DB_URL"] == "postgres://u:pw-xyz-789@db/x"
    masked = spec.masked_env()
    assert masked == {"HF_TOKEN": MASK, "DB_URL": MASK, "API_KEY": MASK, "CACHE": "/tmp/cache dir"}
    script = "\n".join(spec.shell_exports())
    for secret in ("hf_not_a_real_token_123", "pw-xyz-789", "literal-key-456"):
        assert secret not in script and secret not in str(masked)
    assert 'export HF_TOKEN="${HF_TOKEN:?}"' in script
    assert 'export API_KEY="${API_KEY:?}"' in script
    # The exports work in bash: values come from the caller's environment, and a missing one
    # stops the script.
    probe = script + '\nprintf "%s|%s|%s" "$HF_TOKEN" "$DB_URL" "$CACHE"'
    env = {"PATH": "/usr/bin:/bin", "HF_TOKEN": "t1", "MY_PASSWORD": "p1", "API_KEY": "k1"}
    done = subprocess.run(["bash", "-c", probe], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "t1|postgres://u:p1@db/x|/tmp/cache dir"
    del env["HF_TOKEN"]
    done = subprocess.run(["bash", "-c", probe], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "HF_TOKEN" in done.stderr


def test_missing_variable_is_a_config_error(write_space, monkeypatch):
    monkeypatch.delenv("TUNER_TEST_UNSET_VAR", raising=False)
    data = small_space({"x": {"kind": "store_true", "flag": "--x"}}, {"x": False})
    data["server"]["env"] = {"HOME_DIR": "${TUNER_TEST_UNSET_VAR}/x"}
    path = write_space(data)
    space = load_space(path)
    with pytest.raises(ConfigError) as caught:
        space.render(space.baseline)
    message = str(caught.value)
    assert message.startswith(f"{path}:") and "server.env.HOME_DIR" in message
    assert "fix: export TUNER_TEST_UNSET_VAR=" in message
    unresolved = space.render(space.baseline, resolve=False)   # a dry run needs no secrets
    assert unresolved.env["HOME_DIR"] == "${TUNER_TEST_UNSET_VAR}/x"


def test_env_parameters_merge_with_fixed_env(write_space):
    mode = {"kind": "categorical", "env": "SGLANG_MODE", "choices": ["a", "b"]}
    data = small_space({"mode": mode}, {"mode": "b"})
    data["server"]["env"] = {"PYTHONUNBUFFERED": "1"}
    space = load_space(write_space(data))
    spec = space.render(space.baseline)
    assert spec.env == {"PYTHONUNBUFFERED": "1", "SGLANG_MODE": "b"}
    assert "SGLANG_MODE" not in spec.command_line
