"""YAML mistakes: each is refused at load with one line naming the file, line, field and fix."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from tuner.errors import ConfigError
from tuner.space import load_space


def _params(data: dict[str, Any]) -> dict[str, Any]:
    return data["parameters"]


# (what the user did wrong, the change to glm5.yaml, field, reason, fix)
MISTAKES: list[tuple[str, Callable[[dict[str, Any]], Any], str, str, str]] = [
    ("int range upside down",
     lambda d: _params(d)["max_running_requests"].update(low=4096),
     "parameters.max_running_requests.low", "must be below high (4096 >= 2048)",
     "set low below high (use a categorical for a single value)"),
    ("noise given in percent",
     lambda d: d["objective"].update(noise=5),
     "objective.noise", "5 is a share of a figure, not a percent", "write 0.05 for 5%"),
    ("misspelt top-level section",
     lambda d: d.update(paramters=d["parameters"]),
     "paramters", "unknown key 'paramters'",
     "did you mean 'parameters'? allowed here: name, engine, engine_version, model, description, "
     "host, server, timeouts, patches, parameters, constraints, fit, baseline, workload, "
     "objective, probe"),
    ("misspelt parameter key",
     lambda d: _params(d)["attention_backend"].update(choice=["triton"]),
     "parameters.attention_backend.choice", "unknown key 'choice'",
     "did you mean 'choices'? allowed here: description, when, default, shape, flag, env, unset, "
     "json_key, kind, choices"),
    ("unknown shape",
     lambda d: _params(d)["mem_fraction_static"].update(shape="cliff"),
     "parameters.mem_fraction_static.shape", "'cliff' is not a shape",
     "use one of up_to_failure, saturating, or drop shape:"),
    ("shape on a categorical of words",
     lambda d: _params(d)["attention_backend"].update(shape="up_to_failure"),
     "parameters.attention_backend.shape",
     "up_to_failure applies to numbers, but the values are 'flashinfer', 'triton', 'fa3'",
     "drop shape: here, or declare it on an int or float parameter"),
    ("shape on a yes/no switch",
     lambda d: _params(d)["cuda_graph"].update(shape="saturating"),
     "parameters.cuda_graph.shape",
     "saturating applies to numbers, but the values are false, true",
     "drop shape: here, or declare it on an int or float parameter"),
    ("unknown kind",
     lambda d: _params(d)["attention_backend"].update(kind="choice"),
     "parameters.attention_backend.kind", "kind 'choice' is unknown",
     "use one of bool, categorical, float, int, paired, patch, store_true"),
    ("patch not declared",
     lambda d: _params(d)["autotune_gate"].update(patch="autotune"),
     "parameters.autotune_gate.patch", "patch 'autotune' is not declared under patches:",
     "did you mean 'autotune_gate'? declare it under patches: or use one of autotune_gate, "
     "force_allreduce_fusion"),
    ("condition on an unknown parameter",
     lambda d: _params(d)["autotune_gate"].update(when={"moe_backend": "flashinfer_cutlass"}),
     "parameters.autotune_gate.when.moe_backend", "'moe_backend' is not a declared parameter",
     "did you mean 'moe_runner_backend'? use one of moe_runner_backend"),
    ("condition on a later parameter",
     lambda d: _params(d)["autotune_gate"].update(when={"radix_cache": True}),
     "parameters.autotune_gate.when.radix_cache",
     "refers to 'radix_cache', which is not declared before it",
     "conditions read earlier parameters only: move 'radix_cache' above this one"),
    ("condition value that is not a choice",
     lambda d: _params(d)["autotune_gate"].update(
         when={"moe_runner_backend": "flashinfer_cutass"}),
     "parameters.autotune_gate.when.moe_runner_backend",
     "'flashinfer_cutass' is not a value of this parameter "
     "('auto', 'triton', 'flashinfer_cutlass', 'flashinfer_trtllm')",
     "compare with a value that parameter can take"),
    ("baseline outside the range",
     lambda d: d["baseline"].update(mem_fraction_static=0.99),
     "baseline.mem_fraction_static", "0.99 is outside 0.85..0.96 step 0.01",
     "use a value in 0.85..0.96 step 0.01"),
    ("baseline value not a choice",
     lambda d: d["baseline"].update(attention_backend="fa4"),
     "baseline.attention_backend", "'fa4' is not one of the choices",
     "use one of 'flashinfer', 'triton', 'fa3'"),
    ("baseline missing an active parameter",
     lambda d: d["baseline"].pop("attention_backend"),
     "baseline", "the active parameter 'attention_backend' has no value",
     "add `attention_backend: <value>` ('flashinfer', 'triton', 'fa3'), or give the parameter "
     "a default:"),
    ("baseline sets an inactive parameter",
     lambda d: d["baseline"].update(autotune_gate=True),
     "baseline.autotune_gate",
     "is inactive here (moe_runner_backend == 'flashinfer_cutlass' is false)",
     "leave it out, or change the values so that its when: holds"),
    ("flag both fixed and searched",
     lambda d: d["server"]["flags"].update({"--mem-fraction-static": 0.92}),
     "parameters.mem_fraction_static.flag",
     "--mem-fraction-static is also given by server.flags.--mem-fraction-static",
     "give each flag in one place (a searched flag cannot also be fixed)"),
    ("port given as a flag",
     lambda d: d["server"]["flags"].update({"--port": 30001}),
     "server.flags.--port", "--port is set through server.port",
     "remove it here and set server.port"),
    ("unknown engine",
     lambda d: d.update(engine="tgi"),
     "engine", "engine 'tgi' is unknown", "use one of sglang, transformers, vllm"),
    ("empty choices",
     lambda d: _params(d)["attention_backend"].update(choices=[]),
     "parameters.attention_backend.choices", "no choices",
     "list at least one value: choices: [a, b]"),
    ("log scale from zero",
     lambda d: _params(d)["max_running_requests"].update(low=0),
     "parameters.max_running_requests.low", "log: true needs low >= 1 (got 0)",
     "raise low to 1 or more, or set log: false"),
    ("step does not divide the range",
     lambda d: _params(d)["mem_fraction_static"].update(step=0.03),
     "parameters.mem_fraction_static.step", "0.03 does not divide high - low (0.11)",
     "choose low, high and step so that (high - low) / step is whole"),
    ("levels out of order",
     lambda d: d["workload"].update(levels=[256, 64]),
     "workload.levels[1]", "64 is not above the level before it (256)",
     "list levels in increasing order, each once"),
    ("level not positive",
     lambda d: d["workload"].update(levels=[0, 64]),
     "workload.levels[0]", "0 is not a positive concurrency", "use 1 or more"),
    ("quoted number",
     lambda d: _params(d)["max_running_requests"].update(high="2048"),
     "parameters.max_running_requests.high", "input should be a valid integer (got '2048')",
     "write the number without quotes"),
    ("boolean environment value",
     lambda d: d["server"]["env"].update(SGLANG_X=True),
     "server.env.SGLANG_X", "true is not a text", 'quote the value: SGLANG_X: "1"'),
    ("neither flag nor env",
     lambda d: _params(d)["attention_backend"].pop("flag"),
     "parameters.attention_backend", "needs exactly one of flag: or env:",
     "give `flag: --name` for a server flag or `env: NAME` for a variable"),
    ("unknown operator",
     lambda d: d["constraints"][0].update(when={"mem_fraction_static": {"gte": 0.96}}),
     "constraints[0].when.mem_fraction_static.gte", "unknown operator 'gte'",
     "use one of eq, ne, in, not_in, lt, le, gt, ge"),
    ("unknown constraint action",
     lambda d: d["constraints"][0].update(action="drop"),
     "constraints[0].action", "'drop' is not allowed", "use one of 'skip' or 'warn'"),
    ("malformed secret reference in a flag",
     lambda d: d["server"]["flags"].update({"--api-key": "${API_KEY"}),
     "server.flags.--api-key",
     "'${API_KEY' has a malformed reference",
     "write references as ${NAME} (no defaults, no nesting)"),
    ("flag written without dashes",
     lambda d: _params(d)["attention_backend"].update(flag="attention-backend"),
     "parameters.attention_backend.flag", "'attention-backend' is not a flag name",
     "write the flag alone, as --name (no value, no '=', no spaces)"),
    ("probe asks for more matches than prompts",
     lambda d: d["probe"].update(min_matching_prompts=5),
     "probe.min_matching_prompts", "5 is more than the 3 prompts",
     "use at most 3, or add prompts"),
    ("patch that changes nothing",
     lambda d: d["patches"]["force_allreduce_fusion"].update(
         replace=d["patches"]["force_allreduce_fusion"]["find"]),
     "patches.force_allreduce_fusion.replace", "is the same as find",
     "give the text after the change"),
    ("ordering operator on text values",
     lambda d: d["constraints"][0].update(when={"attention_backend": {"lt": 3}}),
     "constraints[0].when.attention_backend",
     "lt compares numbers, but the values are 'flashinfer', 'triton', 'fa3'",
     "compare with a value that parameter can take"),
]


@pytest.mark.parametrize("change, field, reason, fix",
                         [m[1:] for m in MISTAKES], ids=[m[0] for m in MISTAKES])
def test_mistake_gives_one_line(glm5_data, write_space, change, field, reason, fix):
    change(glm5_data)
    path = write_space(glm5_data)
    with pytest.raises(ConfigError) as caught:
        load_space(path)
    message = str(caught.value)
    assert "\n" not in message
    assert re.fullmatch(rf"{re.escape(str(path))}:\d+: {re.escape(field)}: "
                        rf"{re.escape(reason)}; fix: {re.escape(fix)}", message), message
    assert caught.value.exit_code == 2


def test_line_number_points_at_the_field(write_space):
    text = """\
parameters:
  x:
    kind: int
    flag: --x
    low: 10
    high: 5
baseline: {x: 7}
"""
    path = write_space(text)
    with pytest.raises(ConfigError) as caught:
        load_space(path)
    assert str(caught.value).startswith(f"{path}:5: parameters.x.low: must be below high")


def test_yaml_syntax_error_has_line_and_column(write_space):
    path = write_space("parameters:\n  x: {kind: store_true, flag: --x\nbaseline: {x: true}\n")
    with pytest.raises(ConfigError) as caught:
        load_space(path)
    message = str(caught.value)
    assert re.match(rf"{re.escape(str(path))}:3:9: YAML syntax error: expected .+; fix: ", message)
    assert "\n" not in message


def test_duplicate_key_refused(write_space):
    text = """\
parameters:
  x: {kind: store_true, flag: --x}
  x: {kind: store_true, flag: --y}
baseline: {x: true}
"""
    path = write_space(text)
    with pytest.raises(ConfigError) as caught:
        load_space(path)
    assert str(caught.value) == (
        f"{path}:3: parameters.x: 'x' is given twice (YAML would silently keep the last one); "
        "fix: keep one `x:` under parameters")


@pytest.mark.parametrize("text, reason", [
    ("", "is empty"),
    ("- a\n- b\n", "is not a mapping"),
])
def test_not_a_space_at_all(write_space, text, reason):
    path = write_space(text)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: {reason}; fix: "):
        load_space(path)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match=r"nope\.yaml: file not found; fix: "):
        load_space(tmp_path / "nope.yaml")


def test_several_mistakes_are_counted(glm5_data, write_space):
    glm5_data["timeouts"]["ready_s"] = -1
    glm5_data["timeouts"]["level_s"] = 0
    with pytest.raises(ConfigError, match=r"timeouts\.ready_s: .*\(1 more problem after this\)$"):
        load_space(write_space(glm5_data))
