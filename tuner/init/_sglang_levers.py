"""SGLang's levers: the scheduler and memory levers everywhere, CUDA graphs and kernels on GPUs,
parallel sizes that divide the GPUs and hold the weights, MoE backends and expert parallelism
for MoE models (with the autotune-gate patch where its text is installed), DP attention for
latent-attention MoE models and data-parallel replicas for the others, NEXTN speculation for a
model with an MTP head."""

from __future__ import annotations

from typing import Any

from tuner.init._context import LeverContext, capability, memory
from tuner.init._plan import INACTIVE, Constraint, Param, baseline_value
from tuner.init._replicas import ReplicaFlags, data_parallel
from tuner.patches import PatchSpec

__all__ = ["KNOWN_PATCHES", "sglang_levers"]

# Source patches the tuner knows, with the engine versions they were written for (their text is
# checked against the host's installed files before one is offered).
KNOWN_PATCHES: dict[str, list[PatchSpec]] = {
    "sglang": [
        PatchSpec(
            name="autotune_gate",
            package="sglang",
            file="srt/model_executor/model_runner.py",
            description="run FlashInfer autotune for the flashinfer_cutlass MoE backend",
            find="            # TODO: flashinfer_cutlass will cause some flashinfer compilation errors. To be fixed.\n"
            '            # "flashinfer_cutlass",\n',
            replace="            # TODO: flashinfer_cutlass will cause some flashinfer compilation errors. To be fixed.\n"
            '            "flashinfer_cutlass",\n',
        )
    ],
}

# SGLang's layout flags, for data-parallel replicas
_LAYOUT = ReplicaFlags("tp_size", "--tp-size", "dp_size", "--dp-size", "--pp-size")


def sglang_levers(lv: LeverContext) -> None:
    plan = lv.plan
    plan.add(
        lv.cap_param(
            "max_running_requests", "--max-running-requests", "chosen by SGLang from the KV pool"
        )
    )
    if lv.gpus:
        plan.add(
            lv.param(
                "mem_fraction_static",
                {
                    "kind": "float",
                    "flag": "--mem-fraction-static",
                    "low": 0.80,
                    "high": 0.95,
                    "step": 0.01,
                    "shape": "up_to_failure",
                },
                "GPU memory for weights + KV pool: more pool admits more requests, too much "
                "runs out of memory at CUDA-graph capture (0.80-0.95 is SGLang's usual band)",
            )
        )
        plan.add(
            lv.param(
                "cuda_graph",
                {"kind": "bool", "flag": "--disable-cuda-graph", "when_false": True},
                "true: decode runs in CUDA graphs (no flag); false: --disable-cuda-graph frees "
                "their memory for the KV pool",
                unset=False,
            )
        )
        if lv.plan.has("cuda_graph"):
            sizes = [s for s in (32, 64, 128, 256, 512, 1024) if s <= max(64, 2 * lv.top())][-4:]
            plan.add(
                lv.param(
                    "cuda_graph_max_bs",
                    {
                        "kind": "categorical",
                        "flag": "--cuda-graph-max-bs",
                        "choices": sizes,
                        "when": {"cuda_graph": True},
                    },
                    "largest decode batch captured in a graph; a batch above it runs eager; "
                    "unset = SGLang's choice for the GPU",
                )
            )
    else:
        plan.left_out.append(
            "--mem-fraction-static, --disable-cuda-graph: no GPUs read on the host"
        )
    plan.add(
        lv.param(
            "chunked_prefill_size",
            {
                "kind": "categorical",
                "flag": "--chunked-prefill-size",
                "choices": [2048, 4096, 8192, 16384, -1],
            },
            "prompt tokens prefilled per step: smaller interleaves decode better, "
            "-1 turns chunking off; unset = SGLang's choice for the GPU",
        )
    )
    plan.add(
        lv.param(
            "schedule_conservativeness",
            {
                "kind": "float",
                "flag": "--schedule-conservativeness",
                "low": 0.3,
                "high": 1.5,
                "step": 0.1,
            },
            "how much of the KV pool the scheduler keeps for running requests' outputs "
            "(SGLang's tuning guide: lower it when the pool is under-used); unset = 1.0",
        )
    )
    attention = ["flashinfer", "triton"]  # on every CUDA GPU
    if 9.0 <= lv.cap < 10.0:
        attention.append("fa3")  # FlashAttention 3 is Hopper-only
    if lv.model and lv.model.mla and 10.0 <= lv.cap < 11.0:
        attention.append("trtllm_mla")
    if lv.gpus:
        plan.add(
            lv.param(
                "attention_backend",
                {
                    "kind": "categorical",
                    "flag": "--attention-backend",
                    "choices": lv.choices("--attention-backend", attention),
                },
                f"attention kernels that run on compute capability {capability(lv)} "
                "(fa3 only on Hopper); unset = SGLang's choice",
            )
        )
        if lv.cap >= 8.9:
            plan.add(
                lv.param(
                    "kv_cache_dtype",
                    {
                        "kind": "categorical",
                        "flag": "--kv-cache-dtype",
                        "choices": lv.choices("--kv-cache-dtype", ["fp8_e4m3"]),
                    },
                    "fp8 KV cache: twice the tokens in the same pool (the probe checks the "
                    "answers stay the same); unset = the model's dtype",
                )
            )
    plan.add(
        lv.param(
            "radix_cache",
            {"kind": "bool", "flag": "--disable-radix-cache", "when_false": True},
            "true: prefix cache on (no flag); false: --disable-radix-cache (no cache "
            "bookkeeping, for traffic without shared prefixes)",
            unset=False,
        )
    )
    _sglang_parallel(lv)
    _sglang_moe(lv)
    _sglang_speculative(lv)


def _sglang_parallel(lv: LeverContext) -> None:
    plan = lv.plan
    if lv.gpus < 2:
        plan.left_out.append("--tp-size, --dp-size: fewer than 2 GPUs")
        return
    sizes = lv.parallel_choices()
    fixed = baseline_value(lv.command, {"kind": "int", "flag": "--tp-size"})
    if sizes == [fixed]:
        plan.left_out.append(
            f"--tp-size: only your {fixed} divides the {lv.gpus} GPUs and holds the weights"
        )
    if sizes and (
        len(sizes) > 1
        or baseline_value(lv.command, {"kind": "int", "flag": "--tp-size"}) in (None, 1)
    ):
        weights = (
            f"{lv.model.weights_gb:g} GB of weights"
            if lv.model and lv.model.weights_gb
            else "weights of unknown size"
        )
        plan.add(
            lv.param(
                "tp_size",
                {"kind": "categorical", "flag": "--tp-size", "choices": sizes},
                f"tensor parallel sizes that divide the {lv.gpus} GPUs and hold {weights} "
                f"({memory(lv)} a GPU); unset = 1",
            )
        )
    if lv.model and lv.model.mla and lv.model.moe:
        plan.add(
            lv.param(
                "dp_attention",
                {"kind": "store_true", "flag": "--enable-dp-attention"},
                "attention data-parallel inside the TP group (MLA models): each request's "
                "cache on one rank, a larger pool; slower at small batches",
                unset=False,
            )
        )
        if plan.has("dp_attention"):
            dp = [d for d in range(2, lv.gpus + 1) if lv.gpus % d == 0]
            plan.add(
                lv.param(
                    "dp_size",
                    {
                        "kind": "categorical",
                        "flag": "--dp-size",
                        "choices": dp,
                        "when": {"dp_attention": True},
                    },
                    "attention ranks with DP attention; SGLang asserts tp_size % dp_size == 0",
                )
            )
            tp = next((p for p in plan.params if p.name == "tp_size"), None)
            for size in [None, *tp.spec["choices"]] if tp and plan.has("dp_size") else []:
                bad = [d for d in dp if (size or 1) % d]
                if bad:
                    plan.constraints.append(
                        Constraint(
                            {"tp_size": size, "dp_size": bad if len(bad) > 1 else bad[0]},
                            "skip",
                            f"SGLang asserts tp_size % dp_size == 0 with --enable-dp-attention (tp {size})",
                        )
                    )
            plan.left_out.append(
                "--dp-size (engine replicas): for an MLA MoE model --dp-size is searched as DP "
                "attention's ranks (dp_size with dp_attention), not as replicas"
            )
    elif lv.command.has("--enable-dp-attention"):
        plan.left_out.append(
            "--dp-size (engine replicas): your command turns on --enable-dp-attention, under "
            "which --dp-size splits attention inside the TP group; kept as given"
        )
    else:
        data_parallel(
            lv,
            _LAYOUT,
            "engine replicas (DataParallelController, no DP attention): each a TP group of "
            "tp x pp GPUs with its own weights and KV cache, requests spread over them",
        )


def _sglang_moe(lv: LeverContext) -> None:
    plan = lv.plan
    model = lv.moe_model("--moe-runner-backend, --ep-size")
    if model is None:
        return
    backends = ["triton"]
    if lv.cap >= 9.0:
        backends.append("flashinfer_cutlass")
    if lv.cap >= 10.0:
        backends.append("flashinfer_trtllm")
    moe = lv.param(
        "moe_runner_backend",
        {
            "kind": "categorical",
            "flag": "--moe-runner-backend",
            "choices": lv.choices("--moe-runner-backend", backends),
        },
        f"MoE kernels for {model.experts} experts on compute capability {capability(lv)} "
        "(flashinfer_trtllm: Blackwell); unset = auto",
    )
    plan.add(moe)
    gate = lv.facts.patches.get("autotune_gate")
    if moe and "flashinfer_cutlass" in moe.spec["choices"]:
        if gate == "clean":
            plan.patches["autotune_gate"] = _patch_doc(KNOWN_PATCHES["sglang"][0])
            plan.add(
                Param(
                    "autotune_gate",
                    {
                        "kind": "patch",
                        "patch": "autotune_gate",
                        "when": {"moe_runner_backend": "flashinfer_cutlass"},
                    },
                    INACTIVE if moe.baseline != "flashinfer_cutlass" else False,
                    "SGLang 0.5.x leaves flashinfer_cutlass out of FlashInfer autotune; its "
                    "text is in the installed model_runner.py",
                )
            )
        else:
            plan.left_out.append(
                f"patch autotune_gate: its text is not in the installed model_runner.py ({gate or 'not read'})"
            )
    tp_fixed = baseline_value(lv.command, {"kind": "int", "flag": "--tp-size"})
    if lv.gpus > 1 and (plan.has("tp_size") or tp_fixed == lv.gpus) and lv.known("--ep-size"):
        plan.add(
            lv.param(
                "ep_size",
                {"kind": "categorical", "flag": "--ep-size", "choices": [lv.gpus]},
                f"expert parallelism over {lv.gpus} GPUs (experts split, not sharded); unset = 1",
            )
        )
        tp = next((p for p in plan.params if p.name == "tp_size"), None)
        for size in [None, *(tp.spec["choices"] if tp else [])] if tp else []:
            if size is None or size < lv.gpus:
                plan.constraints.append(
                    Constraint(
                        {"tp_size": size, "ep_size": lv.gpus},
                        "skip",
                        f"SGLang runs experts over the TP ranks: ep {lv.gpus} needs tp {lv.gpus}",
                    )
                )
    plan.left_out.append(
        "--moe-a2a-backend deepep: needs NVLink or RDMA between the GPUs, which "
        "nvidia-smi's inventory does not show; add it if yours have it"
    )


def _sglang_speculative(lv: LeverContext) -> None:
    plan, cmd = lv.plan, lv.command
    draft = cmd.value("--speculative-draft-model-path")
    if lv.model and lv.model.nextn_layers and not draft:
        algo = lv.param(
            "speculative_algorithm",
            {
                "kind": "categorical",
                "flag": "--speculative-algorithm",
                "choices": lv.choices("--speculative-algorithm", ["NEXTN"]),
            },
            f"the model ships {lv.model.nextn_layers} MTP/NEXTN layer(s): speculative "
            "decoding without a separate draft model; unset = off",
        )
        plan.add(algo)
        if algo is None:
            return
        condition: dict[str, Any] = {"speculative_algorithm": algo.spec["choices"]}
    elif draft:
        condition = {}  # the command's own --speculative-algorithm stays fixed
    else:
        plan.left_out.append(
            "speculative decoding: the model has no MTP/NEXTN layers"
            + ("" if lv.model else " that could be read")
            + " and the command names no draft model"
        )
        return
    when = {"when": condition} if condition else {}
    plan.add(
        lv.param(
            "speculative_num_steps",
            {
                "kind": "categorical",
                "flag": "--speculative-num-steps",
                "choices": [1, 2, 3, 5],
                **when,
            },
            "draft steps per round: more pays at low load, costs at high; unset = SGLang's",
        )
    )
    plan.add(
        lv.param(
            "speculative_eagle_topk",
            {
                "kind": "categorical",
                "flag": "--speculative-eagle-topk",
                "choices": [1, 2, 4],
                **when,
            },
            "candidates per step (1: a chain); unset = SGLang's",
        )
    )
    if plan.has("speculative_eagle_topk"):
        plan.add(
            lv.param(
                "speculative_num_draft_tokens",
                {
                    "kind": "categorical",
                    "flag": "--speculative-num-draft-tokens",
                    "choices": [2, 4, 6, 8],
                    "when": {"speculative_eagle_topk": {"gt": 1}},
                },
                "tokens verified per round; with top-k 1 SGLang sets it to steps + 1 itself",
            )
        )
        if plan.has("attention_backend"):
            plan.constraints.append(
                Constraint(
                    {"speculative_eagle_topk": {"gt": 1}, "attention_backend": "triton"},
                    "skip",
                    "SGLang: speculative_eagle_topk > 1 with page_size > 1 "
                    "runs on the flashinfer backend only",
                )
            )
    if condition and plan.has("max_running_requests"):
        plan.constraints.append(
            Constraint(
                {**condition, "max_running_requests": None},
                "warn",
                "SGLang caps running requests at 48 with speculative decoding "
                "when --max-running-requests is unset",
            )
        )


def _patch_doc(patch: PatchSpec) -> dict[str, str]:
    return {
        "package": patch.package,
        "file": patch.file,
        "description": patch.description,
        "find": patch.find,
        "replace": patch.replace,
    }
