"""vLLM's parallel and speculative levers, against vLLM 0.32.0's recorded ``--help=all``, an
8 x H100 ``nvidia-smi`` answer and config.json files (tests/fixtures/vllm, its README): expert
and data parallelism for an MoE model, none for a dense one; MTP speculation for a model with an
MTP head; a command's own draft kept with its token count searched. The written space loads, and
its baseline is the command."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from tuner.host import CommandResult
from tuner.init._command import read_flags, recognise
from tuner.init._help import EngineFlags, parse_help
from tuner.init._host import Gpu, HostFacts, ModelFacts, _gpus
from tuner.init._levers import choose_levers
from tuner.init._plan import INACTIVE, Plan
from tuner.init._render import SpaceText, Workload, render_space
from tuner.space import SearchSpace, load_space

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
VLLM_FLAGS = parse_help((FIXTURES / "vllm" / "help-all.txt").read_text())
GIB = 2**30


class _Smi:
    """A host whose nvidia-smi answers with the 8 x H100 fixture."""

    name = "local"

    def run(self, command: str, env: object = None, timeout: float = 0.0) -> CommandResult:
        assert "nvidia-smi --query-gpu=index,name,memory.total,compute_cap" in command
        return CommandResult(0, (FIXTURES / "nvidia-smi" / "h100x8_query.csv").read_text(), "")


def _eight_h100() -> list[Gpu]:
    gpus = _gpus(_Smi(), {}, [])  # type: ignore[arg-type]
    assert gpus is not None and len(gpus) == 8
    return gpus


def _model(config: str, weights_gb: float | None) -> ModelFacts:
    text = (FIXTURES / "vllm" / config).read_text()
    return ModelFacts.from_config("/models/m", json.loads(text), int(weights_gb * GIB) if weights_gb else None)


QWEN_MOE = ("config-qwen3-moe.json", 56.9)  # 128 experts, 32 heads: fits one 79.6 GiB H100
GLM_MTP = ("config-glm-moe-mtp.json", 205.8)  # 128 experts, 96 heads, 1 MTP layer: tp >= 3
LLAMA = ("config-llama-dense.json", 15.0)  # dense, 32 heads


def _facts(model: tuple[str, float | None], flags: EngineFlags = VLLM_FLAGS) -> HostFacts:
    return HostFacts("local", "python3", "0.32.0", flags, _eight_h100(), _model(*model), {})


def _plan(command: str, facts: HostFacts) -> tuple[Plan, SpaceText]:
    launch = read_flags(recognise(shlex.split(command)), facts.flags)
    plan = choose_levers(launch, facts, [64, 256])
    text = SpaceText("v", launch, facts, plan, Workload([64, 256], "w", 256, 256, None), "local",
                     False, command, 8000)
    return plan, text


def _written(text: SpaceText, tmp_path: Path) -> SearchSpace:
    path = tmp_path / "v.yaml"
    path.write_text(render_space(text))
    return load_space(path)  # the validator tuner optimize (and its --dry-run) runs first


def _params(plan: Plan) -> dict[str, object]:
    return {p.name: p for p in plan.params}


def _baseline_flags(space: SearchSpace) -> dict[str, object]:
    """The baseline's command line as flag -> value, --speculative-config's JSON read."""
    argv = space.render(space.baseline, resolve=False).argv
    flags: dict[str, object] = {}
    for index, word in enumerate(argv):
        if word.startswith("--") and word not in ("--host", "--port"):
            following = argv[index + 1] if index + 1 < len(argv) else None
            value = None if following is None or following.startswith("--") else following
            flags[word] = json.loads(value) if word == "--speculative-config" and value else value
    return flags


def _command_flags(command: str) -> dict[str, object]:
    words = shlex.split(command)
    flags: dict[str, object] = {}
    for index, word in enumerate(words):
        if word.startswith("--"):
            following = words[index + 1] if index + 1 < len(words) else None
            value = None if following is None or following.startswith("--") else following
            flags[word] = json.loads(value) if word == "--speculative-config" and value else value
    return flags


def test_an_moe_model_on_8_gpus_gets_expert_parallelism_and_dp_sizes_that_divide(tmp_path: Path) -> None:
    command = "vllm serve /models/m --max-num-seqs 128"
    plan, text = _plan(command, _facts(QWEN_MOE))
    params = _params(plan)
    ep = params["expert_parallel"]
    assert ep.spec == {"kind": "store_true", "flag": "--enable-expert-parallel"} and ep.baseline is False
    assert ep.why.startswith("true: whole experts on each of the tp x dp GPUs")
    assert params["tensor_parallel_size"].spec["choices"] == [2, 4, 8]
    assert params["data_parallel_size"].spec["choices"] == [2, 4, 8]
    assert params["data_parallel_size"].baseline is None
    assert plan.fit == {"weights_gb": 56.9, "gpu_memory_gb": 79.6, "gpus": 8, "attention_heads": 32}

    space = _written(text, tmp_path)
    for tp in (None, 2, 4, 8):  # the pairs a trial can run: those whose tp x dp divides the 8 GPUs
        for dp in (None, 2, 4, 8):
            config = {**space.baseline, "tensor_parallel_size": tp, "data_parallel_size": dp}
            skipped = any(v.action == "skip" for v in space.constraint_violations(config))
            assert skipped == bool(8 % ((tp or 1) * (dp or 1))), (tp, dp)
    alone = {**space.baseline, "expert_parallel": True}  # tp 1, dp 1: nothing to spread over
    assert any(v.action == "skip" for v in space.constraint_violations(alone))
    assert not space.constraint_violations({**alone, "data_parallel_size": 8})


def test_without_the_weights_size_the_constraints_alone_keep_tp_x_dp_within_the_gpus(tmp_path: Path) -> None:
    plan, text = _plan("vllm serve /models/m", _facts((QWEN_MOE[0], None)))
    assert plan.fit is None  # nothing to weigh: no fit: rule
    space = _written(text, tmp_path)
    for tp in (None, 2, 4, 8):
        for dp in (None, 2, 4, 8):
            config = {**space.baseline, "tensor_parallel_size": tp, "data_parallel_size": dp}
            assert bool(space.constraint_violations(config)) == bool(8 % ((tp or 1) * (dp or 1))), (tp, dp)


def test_dp_sizes_pair_only_with_a_tp_that_holds_the_weights(tmp_path: Path) -> None:
    command = "vllm serve /models/m --tensor-parallel-size 4"
    plan, text = _plan(command, _facts(GLM_MTP))
    params = _params(plan)
    assert params["tensor_parallel_size"].spec["choices"] == [4, 8]  # 205.8 / 2 > 79.6 GiB
    assert params["data_parallel_size"].spec["choices"] == [2]  # tp 4 x dp 2; tp 8 leaves none
    space = _written(text, tmp_path)
    tp8 = {**space.baseline, "tensor_parallel_size": 8, "data_parallel_size": 2}
    assert [v.reason for v in space.constraint_violations(tp8)][0].startswith("tp 8 x dp 2 = 16 GPUs")
    assert not space.constraint_violations({**space.baseline, "data_parallel_size": 2})


def test_a_dense_model_on_8_gpus_gets_replicas_and_no_expert_parallelism(tmp_path: Path) -> None:
    plan, text = _plan("vllm serve /models/m", _facts(LLAMA))
    params = _params(plan)
    assert "expert_parallel" not in params
    assert "--enable-expert-parallel: a dense model (config.json lists no experts)" in plan.left_out
    assert params["tensor_parallel_size"].spec["choices"] == [2, 4, 8]  # 15 GB fits one GPU
    dp = params["data_parallel_size"]
    assert dp.spec == {"kind": "categorical", "flag": "--data-parallel-size", "choices": [2, 4, 8], "unset": True}
    assert dp.baseline is None and dp.why.startswith("engine replicas: each tp x pp GPUs")
    space = _written(text, tmp_path)
    for tp in (None, 2, 4, 8):  # a pair is skipped where it needs more than the 8 GPUs
        for dp_size in (None, 2, 4, 8):
            config = {**space.baseline, "tensor_parallel_size": tp, "data_parallel_size": dp_size}
            skipped = any(v.action == "skip" for v in space.constraint_violations(config))
            assert skipped == ((tp or 1) * (dp_size or 1) > 8), (tp, dp_size)
    reasons = [v.reason for v in space.constraint_violations(
        {**space.baseline, "tensor_parallel_size": 8, "data_parallel_size": 2})]
    assert "tp 8 x dp 2 or 4 or 8 = 16 or 32 or 64 GPUs, more than the host's 8" in reasons  # the constraint
    assert any(r.startswith("does not fit: tp 8 x pp 1 x dp 2 = 16 GPUs") for r in reasons)  # and fit:
    argv = space.render({**space.baseline, "tensor_parallel_size": 2, "data_parallel_size": 4}, resolve=False).argv
    assert argv[argv.index("--data-parallel-size") + 1] == "4"


def test_replicas_pair_only_with_a_tp_that_holds_the_weights(tmp_path: Path) -> None:
    plan, text = _plan("vllm serve /models/m", _facts((LLAMA[0], 140.0)))  # 140 GB: tp >= 2
    params = _params(plan)
    assert params["tensor_parallel_size"].spec["choices"] == [2, 4, 8]
    assert params["data_parallel_size"].spec["choices"] == [2, 4]  # tp 2 x dp 4; dp 8 needs tp 1
    space = _written(text, tmp_path)
    unset = {**space.baseline, "data_parallel_size": 2}  # tp unset = 1: the weights do not fit
    assert "a replica of tp 1 cannot hold the model: 140 GB of weights / 1 = 140.0 GB > 79.6 GB a GPU" in [
        v.reason for v in space.constraint_violations(unset)]
    assert not space.constraint_violations({**unset, "tensor_parallel_size": 2})


def test_a_model_that_needs_every_gpu_gets_no_replicas() -> None:
    plan, _ = _plan("vllm serve /models/m --tensor-parallel-size 8", _facts((LLAMA[0], 600.0)))
    assert _params(plan)["tensor_parallel_size"].spec["choices"] == [8]  # 600 / 4 = 150 > 79.6 GB
    assert "data_parallel_size" not in _params(plan)
    assert ("--data-parallel-size (engine replicas): the smallest tp that holds the 600 GB of weights "
            "(79.6 GB a GPU) is 8: one replica takes 8 of the 8 GPUs, no room for a second") in plan.left_out


def test_one_gpu_gets_no_replicas() -> None:
    facts = _facts(LLAMA)
    one = HostFacts(facts.where, facts.python, facts.engine_version, facts.flags, facts.gpus[:1], facts.model, {})
    plan, _ = _plan("vllm serve /models/m", one)
    assert not {"tensor_parallel_size", "data_parallel_size"} & set(_params(plan))
    assert "--data-parallel-size (engine replicas): fewer than 2 GPUs" in plan.left_out


def test_the_commands_own_layout_is_the_baseline_even_with_gpus_idle(tmp_path: Path) -> None:
    command = "vllm serve /models/m --tensor-parallel-size 2 --data-parallel-size 3"  # 6 of the 8 GPUs
    plan, text = _plan(command, _facts(LLAMA))
    dp = _params(plan)["data_parallel_size"]
    assert dp.spec["choices"] == [2, 4, 8, 3] and dp.baseline == 3
    space = _written(text, tmp_path)
    assert _baseline_flags(space) == _command_flags(command)
    assert not space.constraint_violations(space.baseline)  # runs on 6 GPUs: not skipped
    assert space.constraint_violations({**space.baseline, "tensor_parallel_size": 4})  # 12 GPUs


def test_expert_parallelism_only_where_the_installed_vllm_knows_the_flag() -> None:
    older = EngineFlags({k: v for k, v in VLLM_FLAGS.flags.items() if "expert-parallel" not in k})
    plan, _ = _plan("vllm serve /models/m", _facts(QWEN_MOE, older))
    assert "expert_parallel" not in _params(plan) and "data_parallel_size" in _params(plan)
    assert "--enable-expert-parallel: not a flag of the installed vllm 0.32.0" in plan.left_out


def test_the_commands_no_form_of_expert_parallelism_is_its_baseline(tmp_path: Path) -> None:
    command = "vllm serve /models/m --no-enable-expert-parallel --data-parallel-size 2"
    plan, text = _plan(command, _facts(QWEN_MOE))
    ep = _params(plan)["expert_parallel"]
    assert ep.spec["kind"] == "paired" and ep.baseline is False
    assert _params(plan)["data_parallel_size"].baseline == 2
    assert _baseline_flags(_written(text, tmp_path)) == _command_flags(command)


def test_an_mtp_model_gets_mtp_speculation(tmp_path: Path) -> None:
    command = "vllm serve /models/m --max-num-seqs 64 --tensor-parallel-size 4"
    plan, text = _plan(command, _facts(GLM_MTP))
    params = _params(plan)
    assert "mtp" in (VLLM_FLAGS.choices("--spec-method") or ())  # the name this vLLM accepts
    method, tokens = params["speculative_method"], params["num_speculative_tokens"]
    assert method.spec == {"kind": "categorical", "flag": "--speculative-config", "json_key": "method",
                           "choices": ["mtp"], "unset": True}
    assert method.baseline is None  # off, as the command runs
    assert tokens.spec["json_key"] == "num_speculative_tokens" and tokens.spec["choices"] == [1, 2, 3]
    assert tokens.spec["when"] == {"speculative_method": "mtp"} and tokens.baseline is INACTIVE
    assert not any("speculative" in why for why in plan.left_out)
    space = _written(text, tmp_path)
    assert _baseline_flags(space) == _command_flags(command)
    on = space.render({**space.baseline, "speculative_method": "mtp", "num_speculative_tokens": 2},
                      resolve=False).argv
    assert json.loads(on[on.index("--speculative-config") + 1]) == {"method": "mtp", "num_speculative_tokens": 2}


def test_a_model_without_mtp_and_no_draft_gets_no_speculation() -> None:
    plan, _ = _plan("vllm serve /models/m", _facts(QWEN_MOE))
    assert not any("speculative" in name for name in _params(plan))
    assert any(why.startswith("speculative decoding: the model has no MTP/NEXTN layers") for why in plan.left_out)


def test_a_commands_draft_is_kept_and_its_token_count_searched(tmp_path: Path) -> None:
    spec = {"model": "/models/draft-1b", "num_speculative_tokens": 5, "method": "draft_model"}
    command = (f"python3 -m vllm.entrypoints.openai.api_server --model /models/m --max-num-seqs 32 "
               f"--speculative-config {shlex.quote(json.dumps(spec))}")
    plan, text = _plan(command, _facts(LLAMA))
    params = _params(plan)
    assert params["speculative_method"].spec["choices"] == ["draft_model"]
    assert params["speculative_method"].spec["unset"] is True  # off is a choice
    assert params["speculative_model"].spec["choices"] == ["/models/draft-1b"]
    assert params["speculative_model"].spec["when"] == {"speculative_method": "draft_model"}
    tokens = params["num_speculative_tokens"]
    assert tokens.spec["choices"] == [3, 4, 5, 6, 7] and tokens.baseline == 5
    space = _written(text, tmp_path)
    assert "--speculative-config" not in space.model.server.flags  # composed from the parameters
    assert _baseline_flags(space) == _command_flags(command)
    off = space.render(space.config({**space.baseline, "speculative_method": None}, drop_inactive=True),
                       resolve=False)
    assert "--speculative-config" not in off.argv
    three = space.render({**space.baseline, "num_speculative_tokens": 3}, resolve=False).argv
    assert json.loads(three[three.index("--speculative-config") + 1]) == {**spec, "num_speculative_tokens": 3}


def test_a_speculative_config_that_is_not_flat_json_stays_fixed(tmp_path: Path) -> None:
    command = "vllm serve /models/m --speculative-config '{\"method\": \"ngram\", \"extra\": {\"a\": 1}}'"
    plan, text = _plan(command, _facts(GLM_MTP))
    assert "--speculative-config" not in plan.searched_flags()
    assert any(why.startswith("--speculative-config: kept as given") for why in plan.left_out)
    assert _baseline_flags(_written(text, tmp_path)) == _command_flags(command)


def test_the_commands_short_spellings_are_its_layout(tmp_path: Path) -> None:
    """`-tp 2 -dp 3` (the spellings vLLM's --help lists beside the long ones) and `--tensor` (an
    abbreviation argparse takes) are the command's layout: its baseline, not fixed flags beside
    the searched ones."""
    facts = _facts(LLAMA)
    for command in ("vllm serve /models/m -tp 2 -dp 3", "vllm serve /models/m --tensor 2 --data-parallel-size=3"):
        launch = read_flags(recognise(shlex.split(command)), facts.flags, ("--tensor-parallel-size",
                                                                           "--data-parallel-size"))
        assert [f.name for f in launch.flags] == ["--tensor-parallel-size", "--data-parallel-size"], command
        plan = choose_levers(launch, facts, [64, 256])
        assert _params(plan)["tensor_parallel_size"].baseline == 2
        assert _params(plan)["data_parallel_size"].baseline == 3
        text = SpaceText("v", launch, facts, plan, Workload([64, 256], "w", 256, 256, None), "local",
                         False, command, 8000)
        space = _written(text, tmp_path)
        assert _baseline_flags(space) == {"--tensor-parallel-size": "2", "--data-parallel-size": "3"}
        assert not space.constraint_violations(space.baseline)
