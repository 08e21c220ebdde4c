"""Which levers a space searches for an engine version, GPUs and model (pure: the host as read).

The SGLang flag list is the emulated host's (SGLang 0.5.9's parser, tuner/emulator/cli_args.py),
the transformers one its recorded --help."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.emulator.cli_args import build_parser
from tuner.init._command import read_flags, recognise
from tuner.init._help import parse_help
from tuner.init._host import Gpu, HostFacts, ModelFacts
from tuner.init._levers import choose_levers
from tuner.init._plan import INACTIVE
from tuner.init._render import SpaceText, Workload, render_space
from tuner.space import SearchSpace, load_space

SGLANG_FLAGS = parse_help(build_parser().format_help())
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BLACKWELL = Gpu("NVIDIA RTX PRO 6000 Blackwell", 97887.0, 12.0)
H100 = Gpu("NVIDIA H100 80GB HBM3", 81559.0, 9.0)


def _model(**changes: object) -> ModelFacts:
    fields = {"path": "/m", "architecture": "X", "experts": None, "nextn_layers": 0, "layers": 32,
              "attention_heads": 32, "mla": False, "max_positions": 8192, "weights_gb": 16.0}
    fields.update(changes)
    return ModelFacts(**fields)  # type: ignore[arg-type]


def _plan(command: str, gpus: list[Gpu] | None, model: ModelFacts | None, patches: dict[str, str] | None = None,
          flags=SGLANG_FLAGS):
    facts = HostFacts("local", "python3", "0.5.9", flags, gpus, model, patches or {})
    launch = read_flags(recognise(command.split()), flags)
    return choose_levers(launch, facts, [64, 256])


def _names(plan) -> set[str]:
    return {p.name for p in plan.params}


def _written(command: str, gpus: list[Gpu], model: ModelFacts, tmp_path: Path) -> SearchSpace:
    """The space ``tuner init`` writes for ``command``, loaded as ``tuner optimize`` loads it."""
    facts = HostFacts("local", "python3", "0.5.9", SGLANG_FLAGS, gpus, model, {})
    launch = read_flags(recognise(command.split()), SGLANG_FLAGS)
    text = SpaceText("s", launch, facts, choose_levers(launch, facts, [64, 256]),
                     Workload([64, 256], "w", 256, 256, None), "local", False, command, 30000)
    path = tmp_path / "s.yaml"
    path.write_text(render_space(text))
    return load_space(path)


SGLANG = "python3 -m sglang.launch_server --model-path /m"


def test_a_dense_model_gets_no_moe_or_speculative_levers() -> None:
    plan = _plan(SGLANG, [H100] * 8, _model())
    assert not _names(plan) & {"moe_runner_backend", "ep_size", "dp_attention", "speculative_algorithm"}
    assert any("dense model" in why for why in plan.left_out)
    assert any(why.startswith("speculative decoding: the model has no MTP") for why in plan.left_out)


def test_an_moe_model_with_an_mtp_head_gets_them() -> None:
    plan = _plan(SGLANG, [BLACKWELL] * 8, _model(experts=256, nextn_layers=1, mla=True, weights_gb=405.0,
                                                  attention_heads=64), {"autotune_gate": "clean"})
    assert {"moe_runner_backend", "autotune_gate", "ep_size", "dp_attention", "dp_size",
            "speculative_algorithm", "speculative_num_steps"} <= _names(plan)
    tp = next(p for p in plan.params if p.name == "tp_size")
    assert tp.spec["choices"] == [8]  # 405 GB / 4 = 101 GB > 95.6 GB a GPU: only 8 holds it
    assert plan.fit == {"weights_gb": 405.0, "gpu_memory_gb": 95.6, "gpus": 8, "attention_heads": 64}


def test_parallel_sizes_divide_the_gpus_hold_the_weights_and_split_the_heads() -> None:
    plan = _plan(SGLANG, [H100] * 8, _model(weights_gb=140.0, attention_heads=64))
    tp = next(p for p in plan.params if p.name == "tp_size")
    assert tp.spec["choices"] == [2, 4, 8] and tp.baseline is None  # 140/2 = 70 GB fits 79.6 GB
    plan = _plan(SGLANG, [H100] * 8, _model(weights_gb=200.0, attention_heads=20))
    assert next(p for p in plan.params if p.name == "tp_size").spec["choices"] == [4]  # 8 does not split 20 heads


def test_a_dense_model_on_8_gpus_gets_replicas_without_dp_attention(tmp_path: Path) -> None:
    plan = _plan(SGLANG, [H100] * 8, _model())  # 16 GB: one GPU holds it
    params = {p.name: p for p in plan.params}
    assert "dp_attention" not in params
    dp = params["dp_size"]
    assert dp.spec == {"kind": "categorical", "flag": "--dp-size", "choices": [2, 4, 8], "unset": True}
    assert dp.baseline is None and dp.why.startswith("engine replicas (DataParallelController")
    space = _written(SGLANG, [H100] * 8, _model(), tmp_path)
    for tp in (None, 2, 4, 8):  # skipped where tp x dp needs more than the 8 GPUs
        for size in (None, 2, 4, 8):
            config = {**space.baseline, "tp_size": tp, "dp_size": size}
            skipped = any(v.action == "skip" for v in space.constraint_violations(config))
            assert skipped == ((tp or 1) * (size or 1) > 8), (tp, size)
    reasons = [v.reason for v in space.constraint_violations({**space.baseline, "tp_size": 8, "dp_size": 2})]
    assert "tp 8 x dp 2 or 4 or 8 = 16 or 32 or 64 GPUs, more than the host's 8" in reasons
    argv = space.render({**space.baseline, "tp_size": 2, "dp_size": 4}, resolve=False).argv
    assert argv[argv.index("--dp-size") + 1] == "4" and "--enable-dp-attention" not in argv


def test_replicas_of_a_model_that_needs_two_gpus(tmp_path: Path) -> None:
    model = _model(weights_gb=140.0, attention_heads=64)  # 140 / 2 = 70 GB fits 79.6 GB
    assert next(p for p in _plan(SGLANG, [H100] * 8, model).params if p.name == "dp_size").spec["choices"] == [2, 4]
    space = _written(SGLANG, [H100] * 8, model, tmp_path)
    unset = {**space.baseline, "dp_size": 4}  # tp unset = 1 cannot hold 140 GB
    assert "a replica of tp 1 cannot hold the model: 140 GB of weights / 1 = 140.0 GB > 79.6 GB a GPU" in [
        v.reason for v in space.constraint_violations(unset)]
    assert not space.constraint_violations({**unset, "tp_size": 2})


def test_a_model_that_needs_every_gpu_gets_no_replicas() -> None:
    plan = _plan(SGLANG + " --tp-size 8", [BLACKWELL] * 8, _model(weights_gb=405.0, attention_heads=64))
    assert "dp_size" not in _names(plan)
    assert ("--dp-size (engine replicas): the smallest tp that holds the 405 GB of weights (95.6 GB a GPU) "
            "is 8: one replica takes 8 of the 8 GPUs, no room for a second") in plan.left_out


def test_mla_moe_keeps_dp_size_for_dp_attention_only() -> None:
    plan = _plan(SGLANG, [H100] * 8, _model(experts=256, mla=True, weights_gb=60.0, attention_heads=64))
    dp = [p for p in plan.params if p.flags == ["--dp-size"]]
    assert [(p.name, p.spec["when"]) for p in dp] == [("dp_size", {"dp_attention": True})]
    assert any(c.reason.startswith("SGLang asserts tp_size % dp_size == 0") for c in plan.constraints)
    assert not any("more than the host's" in c.reason for c in plan.constraints)
    assert any(why.startswith("--dp-size (engine replicas): for an MLA MoE model") for why in plan.left_out)
    # an MoE model without latent attention: replicas, beside expert parallelism
    moe = _plan(SGLANG, [H100] * 8, _model(experts=8, weights_gb=60.0, attention_heads=64))
    assert {"dp_size", "ep_size"} <= _names(moe) and "dp_attention" not in _names(moe)
    assert "when" not in next(p for p in moe.params if p.name == "dp_size").spec


def test_a_command_with_dp_attention_keeps_its_dp_size() -> None:
    plan = _plan(SGLANG + " --enable-dp-attention --dp-size 2 --tp-size 2", [H100] * 8, _model())
    assert "dp_size" not in _names(plan)
    assert any(why.startswith("--dp-size (engine replicas): your command turns on --enable-dp-attention")
               for why in plan.left_out)


def test_one_gpu_and_no_gpu() -> None:
    one = _plan(SGLANG, [H100], _model())
    assert not {"tp_size", "dp_size"} & _names(one) and "cuda_graph" in _names(one)
    assert "--tp-size, --dp-size: fewer than 2 GPUs" in one.left_out
    cpu = _plan(SGLANG, None, _model())
    assert not _names(cpu) & {"cuda_graph", "mem_fraction_static", "attention_backend", "tp_size"}


def test_a_patch_whose_text_is_not_installed_is_left_out() -> None:
    plan = _plan(SGLANG, [BLACKWELL] * 8, _model(experts=8, weights_gb=405.0, attention_heads=64),
                 {"autotune_gate": "mismatch"})
    assert "autotune_gate" not in _names(plan) and not plan.patches
    assert any("autotune_gate" in why and "mismatch" in why for why in plan.left_out)


def test_attention_backends_follow_the_compute_capability() -> None:
    hopper = next(p for p in _plan(SGLANG, [H100], _model()).params if p.name == "attention_backend")
    blackwell = next(p for p in _plan(SGLANG, [BLACKWELL], _model()).params if p.name == "attention_backend")
    assert "fa3" in hopper.spec["choices"] and "fa3" not in blackwell.spec["choices"]


def test_the_commands_values_are_the_baseline_and_inside_the_ranges() -> None:
    plan = _plan(SGLANG + " --max-running-requests 3000 --mem-fraction-static 0.7 --disable-cuda-graph "
                 "--attention-backend torch_native", [H100], _model())
    values = {p.name: p for p in plan.params}
    assert values["max_running_requests"].baseline == 3000 and values["max_running_requests"].spec["high"] >= 3000
    assert values["mem_fraction_static"].baseline == 0.7 and values["mem_fraction_static"].spec["low"] == 0.7
    assert values["cuda_graph"].baseline is False
    assert values["cuda_graph_max_bs"].baseline is INACTIVE  # only with graphs on
    assert "torch_native" in values["attention_backend"].spec["choices"]


def test_a_flag_the_command_sets_on_an_inactive_parameter_stays_fixed() -> None:
    plan = _plan(SGLANG + " --disable-cuda-graph --cuda-graph-max-bs 128", [H100], _model())
    assert "cuda_graph_max_bs" not in _names(plan)
    assert "--cuda-graph-max-bs" not in plan.searched_flags()


@pytest.mark.parametrize("gpus", [None, [H100]])
def test_transformers_levers(gpus) -> None:
    flags = parse_help((FIXTURES / "transformers" / "serve-help.txt").read_text())
    plan = _plan("transformers serve /m --continuous-batching", gpus, _model(), flags=flags)
    names = _names(plan)
    assert {"continuous_batching", "attn_implementation", "num_blocks", "compile"} <= names
    assert ("cuda_graph" in names) == bool(gpus)
    assert next(p for p in plan.params if p.name == "continuous_batching").baseline is True


def test_abbreviations_and_other_spellings_are_the_engines_flags(tmp_path: Path) -> None:
    """SGLang's parser takes a unique prefix (`--tp` is `--tp-size`, `--mem-frac`
    `--mem-fraction-static`) and lists several spellings of a flag (`--ep` beside
    `--ep-size`): the command's values are the baseline however they are spelled, and no flag
    is both fixed and searched."""
    moe = _model(experts=64, weights_gb=60.0, mla=False)
    command = f"{SGLANG} --tp 2 --ep 2 --mem-frac 0.85"
    launch = read_flags(recognise(command.split()), SGLANG_FLAGS, ("--tp-size",))
    assert [f.name for f in launch.flags] == ["--tp-size", "--ep", "--mem-fraction-static"]
    assert launch.value("--ep-size") == launch.value("--expert-parallel-size") == "2"
    space = _written(command, [H100] * 8, moe, tmp_path)
    assert space.baseline["tp_size"] == 2 and space.baseline["ep_size"] == 2
    assert space.baseline["mem_fraction_static"] == 0.85
    assert not space.constraint_violations(space.baseline)
    argv = space.render(space.baseline, resolve=False).argv
    assert argv.count("--tp-size") == 1 and "--tp" not in argv and "--ep" not in argv
    assert argv[argv.index("--ep-size") + 1] == "2"


def test_an_ambiguous_abbreviation_is_not_a_flag_of_the_engine() -> None:
    """`--max` begins several flags: argparse refuses it, and so does tuner init."""
    assert not SGLANG_FLAGS.known("--max")
    assert SGLANG_FLAGS.known("--max-running") and SGLANG_FLAGS.expand("--max-running") == "--max-running-requests"
