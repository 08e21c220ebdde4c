"""search_spaces/glm5.yaml: the real case of calibration.md, checked against the references."""

from __future__ import annotations

import re
from itertools import pairwise

import optuna
import pytest

from tests.support.space import GLM5, REFERENCE, REPO
from tuner.space import load_space

SGLANG_MD = REFERENCE / "sglang.md"
STANDIN = REPO / "tuner" / "emulator" / "standin" / "sglang"


@pytest.fixture(scope="module")
def glm5():
    return load_space(GLM5)


def _pairs(argv):
    return list(pairwise(argv))


def _flag(argv, flag):
    return argv[argv.index(flag) + 1]


def _section(number: int) -> str:
    text = SGLANG_MD.read_text()
    return text.split(f"## {number}.")[1].split(f"## {number + 1}.")[0]


def test_identity(glm5):
    assert (glm5.name, glm5.engine, glm5.engine_version) == ("glm5", "sglang", "0.5.9")
    assert glm5.host is not None and glm5.host.address == "gpu-host"   # a placeholder
    assert glm5.server.port == 30000


def test_baseline_is_calibration_point_b(glm5):
    spec = glm5.render(glm5.baseline)
    pairs = _pairs(spec.argv)
    for fixed in [("--model-path", "/models/GLM-5-NVFP4"), ("--tp-size", "8"),
                  ("--quantization", "modelopt_fp4"), ("--mem-fraction-static", "0.92"),
                  ("--moe-runner-backend", "flashinfer_trtllm"),
                  ("--attention-backend", "flashinfer"), ("--max-running-requests", "64")]:
        assert fixed in pairs
    assert "--trust-remote-code" in spec.argv
    assert "--disable-cuda-graph" not in spec.argv                   # CUDA graphs on
    assert spec.patches == frozenset()                               # gate unpatched
    assert glm5.constraint_violations(glm5.baseline) == []


def test_calibration_points_are_in_the_space(glm5):
    n_on = glm5.config({**glm5.baseline, "moe_runner_backend": "flashinfer_cutlass",
                        "autotune_gate": True, "max_running_requests": None})
    without_graphs = {k: v for k, v in n_on.items() if k != "cuda_graph_max_bs"}
    n_off = glm5.config({**without_graphs, "cuda_graph": False})
    assert "cuda_graph_max_bs" not in n_off
    forced = glm5.config({**n_on, "allreduce_fusion": True, "force_allreduce_fusion": True})
    spec = glm5.render(n_off)
    assert "--disable-cuda-graph" in spec.argv and "--max-running-requests" not in spec.argv
    assert spec.patches == frozenset({"autotune_gate"})
    assert glm5.render(n_on).patches == frozenset({"autotune_gate"})
    assert glm5.render(forced).patches == frozenset({"autotune_gate", "force_allreduce_fusion"})
    assert [v.action for v in glm5.constraint_violations(forced)] == ["warn"]
    assert "236 tok/s" in glm5.render(forced).warnings[0]


def test_out_of_memory_setting_is_skipped(glm5):
    config = glm5.config({**glm5.baseline, "mem_fraction_static": 0.96})
    (violation,) = glm5.constraint_violations(config)
    assert violation.action == "skip" and "0.96" in violation.reason
    assert glm5.constraint_violations(glm5.config({**glm5.baseline,
                                                   "mem_fraction_static": 0.95})) == []


def test_every_flag_is_one_sglang_0_5_9_accepts(glm5):
    """Named in sglang.md §1 (``--speculative-`` + `num-steps`, ... spelled out), else in the 0.5.9
    flag table read from the wheel (tests/real_sglang parses every rendered line with the wheel)."""
    from tuner.emulator import sglang_flags

    section = _section(1)
    known = set(re.findall(r"`(--[a-z0-9-]+)`", section))
    for prefix, names in re.findall(r"`(--[a-z-]+-)` \+ (.+)", section):
        known |= {prefix + name for name in re.findall(r"`([a-z0-9-]+)`", names)}
    wheel = set(sglang_flags.SWITCHES) | {name for row in sglang_flags.OPTIONS for name in row[0].split()}
    assert set(glm5.flags()) <= known | wheel, set(glm5.flags()) - known - wheel
    assert {"--speculative-num-steps", "--dp-size", "--ep-size"} <= known


def test_choices_are_sglang_choices(glm5):
    rows = {line.split("|")[1]: line for line in _section(1).splitlines()
            if line.startswith("| `--")}

    def row(flag):
        return next(text for key, text in rows.items() if f"`{flag}`" in key)

    for name in ("moe_runner_backend", "attention_backend", "kv_cache_dtype"):
        param = glm5.parameters[name]
        for choice in param.choices:
            assert f"`{choice}`" in row(param.flag), (name, choice)


def test_gate_patch_matches_the_exact_0_5_9_text(glm5):
    block = _section(2).split("```python")[1].split("```")[0]
    source = "".join(line + "\n" for line in block.splitlines() if "(0.5.10)" not in line)
    gate = glm5.patches["autotune_gate"]
    assert gate.package == "sglang" and gate.file == "srt/model_executor/model_runner.py"
    assert source.count(gate.find) == 1
    patched = source.replace(gate.find, gate.replace)
    entries = re.findall(r'^\s*"(flashinfer_\w+)",$', patched, flags=re.M)
    assert entries == ["flashinfer_trtllm", "flashinfer_mxfp4", "flashinfer_cutlass"]


@pytest.mark.parametrize("patch_name", ["autotune_gate", "force_allreduce_fusion"])
def test_patches_apply_to_the_emulator_standin(glm5, patch_name):
    patch = glm5.patches[patch_name]
    text = (STANDIN / patch.file).read_text()
    assert text.count(patch.find) == 1
    assert text.replace(patch.find, patch.replace).count(patch.replace) == 1


def test_workloads(glm5):
    real, emulated = glm5.workload_for(False), glm5.workload_for(True)
    assert real.levels == [64, 256, 512, 1024]
    assert emulated.levels == [64, 256, 1024]
    assert (real.input_len, real.output_len, real.time_scale) == (256, 256, 1.0)
    assert [real.requests_for(c) for c in real.levels] == [128, 512, 1024, 2048]
    assert (emulated.output_len, emulated.time_scale, emulated.stream_interval) == (256, 400.0, 256)
    assert [emulated.requests_for(c) for c in emulated.levels] == [128, 256, 1024]
    assert real.api == emulated.api == "sglang"                      # the engine profile's


def test_objective_and_probe(glm5):
    assert glm5.objective.metric == "output_throughput"
    assert (glm5.objective.max_failed_fraction, glm5.objective.prune_margin) == (0.01, 0.10)
    assert len(glm5.probe.prompts) == 3 and glm5.probe.min_matching_prompts == 2


def test_every_configuration_parses_as_sglang_0_5_9_arguments(glm5):
    """The emulator's parser mirrors launch_server's flags and choices (argparse, exit 2)."""
    from tuner.emulator import cli_args

    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=11))
    for _ in range(60):
        trial = study.ask()
        argv = glm5.render(glm5.suggest(trial)).argv
        assert argv[:3] == ["python3", "-m", "sglang.launch_server"]
        parsed = cli_args.parse_server_args(argv[3:])    # SystemExit(2) on an unknown flag
        assert parsed["tp_size"] == int(_flag(argv, "--tp-size")) and parsed["port"] == 30000
        study.tell(trial, 0.0)


def test_the_server_binds_loopback_unless_server_bind_says_otherwise(glm5, glm5_data, write_space):
    def bound(spec):
        return spec.argv[spec.argv.index("--host") + 1]

    assert bound(glm5.render(glm5.baseline)) == "127.0.0.1"   # gpu-host is remote: SSH forward
    assert bound(glm5.render(glm5.baseline, local=True)) == "127.0.0.1"  # --emulate, --host local
    glm5_data["server"]["bind"] = "0.0.0.0"                     # asked for: open to the network
    explicit = load_space(write_space(glm5_data))
    assert bound(explicit.render(explicit.baseline)) == "0.0.0.0"
    assert explicit.fingerprint() == glm5.fingerprint()
