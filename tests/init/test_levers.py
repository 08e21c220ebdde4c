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
    launch = read_flags(recognise(command.split()), flags.takes_value())
    return choose_levers(launch, facts, [64, 256])


def _names(plan) -> set[str]:
    return {p.name for p in plan.params}


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


def test_one_gpu_and_no_gpu() -> None:
    one = _plan(SGLANG, [H100], _model())
    assert "tp_size" not in _names(one) and "cuda_graph" in _names(one)
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
