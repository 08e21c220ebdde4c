"""vLLM's and ``transformers serve``'s levers: batch and memory limits, switches their
``--help`` offers in pairs, and GPU-only ones (memory share, CUDA graphs, fp8 KV cache, tensor
parallel sizes) where there are GPUs; for vLLM also data-parallel replicas, with expert
parallelism for MoE models, and ``--speculative-config`` (composed with ``json_key:``) for a
model with an MTP head or a command that names its own speculation."""

from __future__ import annotations

import json
from typing import Any

from tuner.init._context import LeverContext
from tuner.init._plan import Constraint, Param, baseline_value
from tuner.init._replicas import ReplicaFlags, data_parallel

__all__ = ["transformers_levers", "vllm_levers"]

# vLLM's layout flags, for data-parallel replicas
_LAYOUT = ReplicaFlags(
    "tensor_parallel_size",
    "--tensor-parallel-size",
    "data_parallel_size",
    "--data-parallel-size",
    "--pipeline-parallel-size",
)


def vllm_levers(lv: LeverContext) -> None:
    plan, cmd = lv.plan, lv.command
    plan.add(
        lv.cap_param("max_num_seqs", "--max-num-seqs", "vLLM's default (256 on GPUs, 128 on CPU)")
    )
    tokens = [2048, 4096, 8192, 16384] if lv.gpus else [256, 512, 1024, 2048, 4096]
    plan.add(
        lv.param(
            "max_num_batched_tokens",
            {"kind": "categorical", "flag": "--max-num-batched-tokens", "choices": tokens},
            "tokens per engine step: larger prefills faster, smaller keeps decode steps short; "
            "unset = vLLM's default",
        )
    )
    if lv.facts.flags.known("--no-enable-chunked-prefill"):
        plan.add(
            lv.param(
                "chunked_prefill",
                {"kind": "paired", "flag": "--enable-chunked-prefill"},
                "--enable-chunked-prefill / --no-enable-chunked-prefill; unset = vLLM's default (on)",
            )
        )
    if lv.facts.flags.known("--no-enable-prefix-caching"):
        plan.add(
            lv.param(
                "prefix_caching",
                {"kind": "paired", "flag": "--enable-prefix-caching"},
                "--enable-prefix-caching / --no-...; unset = vLLM's default (on)",
            )
        )
    blocks = [16, 32] if lv.gpus else [32, 64, 128, 256]
    plan.add(
        lv.param(
            "block_size",
            {
                "kind": "categorical",
                "flag": "--block-size",
                "choices": lv.choices("--block-size", blocks),
            },
            "KV-cache page in tokens"
            + ("" if lv.gpus else " (the CPU backend takes multiples of 32)")
            + "; unset = vLLM's default",
        )
    )
    if lv.gpus:
        plan.add(
            lv.param(
                "gpu_memory_utilization",
                {
                    "kind": "float",
                    "flag": "--gpu-memory-utilization",
                    "low": 0.80,
                    "high": 0.95,
                    "step": 0.01,
                    "shape": "up_to_failure",
                },
                "share of GPU memory vLLM takes (weights + KV cache); unset = 0.9",
            )
        )
        if not cmd.has("--enforce-eager"):
            plan.add(
                lv.param(
                    "enforce_eager",
                    {"kind": "store_true", "flag": "--enforce-eager"},
                    "true: no CUDA graphs (memory for the KV cache instead of decode speed)",
                    unset=False,
                )
            )
        if lv.cap >= 8.9:
            plan.add(
                lv.param(
                    "kv_cache_dtype",
                    {
                        "kind": "categorical",
                        "flag": "--kv-cache-dtype",
                        "choices": lv.choices("--kv-cache-dtype", ["fp8"]),
                    },
                    "fp8 KV cache: twice the tokens; unset = the model's dtype",
                )
            )
        sizes = lv.parallel_choices()
        if lv.gpus > 1 and sizes:
            plan.add(
                lv.param(
                    "tensor_parallel_size",
                    {"kind": "categorical", "flag": "--tensor-parallel-size", "choices": sizes},
                    f"sizes that divide the {lv.gpus} GPUs and hold the weights; unset = 1",
                )
            )
    else:
        plan.left_out.append(
            "--gpu-memory-utilization, --tensor-parallel-size, CUDA graphs: no GPUs read"
        )
    _vllm_parallel(lv)
    _vllm_speculative(lv)
    given = cmd.value("--max-model-len")
    limit = (
        int(given)
        if isinstance(given, str) and given.isdigit()
        else (lv.model.max_positions if lv.model else None)
    )
    batched = next((p for p in plan.params if p.name == "max_num_batched_tokens"), None)
    if limit and batched and plan.has("chunked_prefill"):
        small = [c for c in batched.spec["choices"] if c < limit]
        if small:
            plan.constraints.append(
                Constraint(
                    {"chunked_prefill": False, "max_num_batched_tokens": {"lt": limit}},
                    "skip",
                    f"vLLM refuses to start: max_num_batched_tokens below "
                    f"max_model_len ({limit}) with chunked prefill off",
                )
            )


def _vllm_parallel(lv: LeverContext) -> None:
    """Data-parallel replicas on several GPUs (:mod:`._replicas`), and for an MoE model expert
    parallelism on/off besides."""
    plan, cmd = lv.plan, lv.command
    model = lv.moe_model("--enable-expert-parallel")
    if model is None:  # a dense model: replicas, each with its own copy of the weights
        data_parallel(
            lv,
            _LAYOUT,
            "engine replicas: each tp x pp GPUs with its own weights and KV cache, requests "
            "spread over them",
        )
        return
    if lv.gpus < 2:
        plan.left_out.append("--enable-expert-parallel, --data-parallel-size: fewer than 2 GPUs")
        return
    fixed_tp = baseline_value(cmd, {"kind": "int", "flag": "--tensor-parallel-size"}) or 1
    fixed_dp = baseline_value(cmd, {"kind": "int", "flag": "--data-parallel-size"}) or 1
    tp = next((p for p in plan.params if p.name == "tensor_parallel_size"), None)
    dp = data_parallel(
        lv,
        _LAYOUT,
        "engine replicas: attention data-parallel, the experts spread over tp x dp GPUs",
    )
    if not (tp or dp or fixed_tp * fixed_dp > 1):
        plan.left_out.append(
            "--enable-expert-parallel: no tp or dp size above 1 to spread experts over"
        )
        return
    # `--no-enable-expert-parallel` in the command: the switch's two forms, so the baseline is it
    negative = cmd.has("--no-enable-expert-parallel")
    ep = lv.param(
        "expert_parallel",
        {"kind": "paired" if negative else "store_true", "flag": "--enable-expert-parallel"},
        "true: whole experts on each of the tp x dp GPUs, tokens sent to them all-to-all, "
        "instead of every expert sliced over the TP GPUs; gains with many small experts; "
        "false = vLLM's default",
        unset=False,
    )
    plan.add(ep)
    alone = {
        name: None
        for name, param in (("tensor_parallel_size", tp), ("data_parallel_size", dp))
        if param
    }
    if ep and alone and (tp or fixed_tp == 1) and (dp or fixed_dp == 1):  # tp 1, dp 1 reachable
        plan.constraints.append(
            Constraint(
                {"expert_parallel": True, **alone},
                "skip",
                "expert parallelism over one GPU (tp 1, dp 1) is no parallelism",
            )
        )
    if ep:
        plan.left_out.append(
            "--all2all-backend (deepep, pplx): needs NVLink or RDMA between the GPUs, which "
            "nvidia-smi's inventory does not show; add it if yours have it"
        )


_SPEC = "--speculative-config"


def _vllm_speculative(lv: LeverContext) -> None:
    """``--speculative-config`` composed from ``json_key:`` parameters: the command's own
    speculation kept and its token count tuned, else MTP for a model that ships the layers."""
    plan, cmd = lv.plan, lv.command
    own = [f for f in ("--spec-method", "--spec-model", "--spec-tokens") if cmd.has(f)]
    if own:
        plan.left_out.append(
            f"speculative decoding: your command sets it with {', '.join(own)}; kept as given"
        )
        return
    if cmd.has(_SPEC):
        _given_speculation(lv, cmd.value(_SPEC))
        return
    if not (lv.model and lv.model.nextn_layers):
        plan.left_out.append(
            "speculative decoding: the model has no MTP/NEXTN layers"
            + ("" if lv.model else " that could be read")
            + " and the command names no draft (give --speculative-config with your draft "
            'model, or {"method": "ngram"}, and its token count is searched)'
        )
        return
    # vLLM's method names, where its --help lists them (--spec-method, beside --speculative-config)
    allowed = lv.facts.flags.choices("--spec-method")
    if not lv.known(_SPEC):
        return
    if allowed is not None and "mtp" not in allowed:
        plan.left_out.append(
            f"speculative decoding (MTP): {lv.version}'s --spec-method lists no mtp"
        )
        return
    method = lv.param(
        "speculative_method",
        {"kind": "categorical", "flag": _SPEC, "json_key": "method", "choices": ["mtp"]},
        f"the model ships {lv.model.nextn_layers} MTP layer(s): vLLM drafts with them, no "
        "draft model; pays at low load, can cost at high; null = no speculation",
    )
    plan.add(method)
    if method:
        plan.add(
            lv.param(
                "num_speculative_tokens",
                {
                    "kind": "categorical",
                    "flag": _SPEC,
                    "json_key": "num_speculative_tokens",
                    "choices": [1, 2, 3],
                    "when": {"speculative_method": "mtp"},
                },
                "tokens the MTP head drafts per step: 1 is accepted most often, 2-3 pay while "
                "acceptance stays high",
                unset=False,
            )
        )


def _given_speculation(lv: LeverContext, given: Any) -> None:
    """The command's ``--speculative-config``: its keys kept (one choice each, its method or
    draft model able to be switched off) and ``num_speculative_tokens`` tuned around its value."""
    plan = lv.plan
    try:
        keys = json.loads(given) if isinstance(given, str) else None
    except ValueError:
        keys = None
    if not isinstance(keys, dict) or not all(
        k.isascii() and k.isidentifier() and isinstance(v, (str, int, float))
        for k, v in keys.items()
    ):
        keys = {}  # not a flat object (a nested key, a list): kept as the user wrote it
    gate = next((k for k in ("method", "model") if k in keys), None)
    count = keys.get("num_speculative_tokens")
    if gate is None or not (count is None or (type(count) is int and count > 0)):
        plan.left_out.append(
            "--speculative-config: kept as given (searched only as a flat JSON object "
            "with a method or model)"
        )
        return
    draft = f" (draft {keys['model']})" if gate == "method" and "model" in keys else ""
    plan.add(
        Param(
            f"speculative_{gate}",
            {
                "kind": "categorical",
                "flag": _SPEC,
                "json_key": gate,
                "choices": [keys[gate]],
                "unset": True,
            },
            keys[gate],
            f"your --speculative-config's {gate} {keys[gate]}{draft}, kept; null = no "
            "speculation, to measure what it gains",
        )
    )
    when = {f"speculative_{gate}": keys[gate]}
    for key, value in keys.items():
        if key not in (gate, "num_speculative_tokens"):
            plan.add(
                Param(
                    f"speculative_{key}",
                    {
                        "kind": "categorical",
                        "flag": _SPEC,
                        "json_key": key,
                        "choices": [value],
                        "when": when,
                    },
                    value,
                    f"your --speculative-config's {key}, kept",
                )
            )
    choices = sorted({max(1, count + d) for d in (-2, -1, 0, 1, 2)}) if count else [1, 2, 3, 4, 5]
    plan.add(
        Param(
            "num_speculative_tokens",
            {
                "kind": "categorical",
                "flag": _SPEC,
                "json_key": "num_speculative_tokens",
                "choices": choices,
                "when": when,
                **({} if count else {"unset": True}),
            },
            count,
            f"tokens drafted per step, around your {count if count else 'default'}: more pays "
            "while the drafts are accepted (low load), fewer at high load",
        )
    )


def transformers_levers(lv: LeverContext) -> None:
    plan = lv.plan
    plan.add(
        lv.param(
            "continuous_batching",
            {"kind": "bool", "flag": "--continuous-batching"},
            "paged attention and a batching loop; off serves one request at a time",
            unset=False,
        )
    )
    plan.add(
        lv.param(
            "attn_implementation",
            {"kind": "categorical", "flag": "--attn-implementation", "choices": ["sdpa", "eager"]},
            "attention kernels every install has (flash_attention_2/3 need their packages; "
            "flex_attention fails under continuous batching in 5.17); unset = transformers'",
        )
    )
    cb = {"when": {"continuous_batching": True}} if plan.has("continuous_batching") else {}
    if lv.gpus:
        plan.add(
            lv.param(
                "cuda_graph",
                {"kind": "paired", "flag": "--cb-use-cuda-graph", **cb},
                "--cb-use-cuda-graph / --no-...; unset = transformers decides",
            )
        )
    plan.add(
        lv.param(
            "block_size",
            {
                "kind": "categorical",
                "flag": "--cb-block-size",
                "choices": [32, 64, 128, 256, 512],
                **cb,
            },
            "KV-cache page in tokens; unset = 256",
        )
    )
    plan.add(
        lv.param(
            "num_blocks",
            {
                "kind": "categorical",
                "flag": "--cb-num-blocks",
                "choices": [256, 1024, 4096, 16384],
                **cb,
            },
            "KV-cache pages; too many for the free memory fails at the first request; "
            "unset = sized from free memory",
        )
    )
    plan.add(
        lv.param(
            "max_batch_tokens",
            {
                "kind": "categorical",
                "flag": "--cb-max-batch-tokens",
                "choices": [512, 2048, 8192, 32768],
                **cb,
            },
            "tokens per forward pass; unset = sized from free memory",
        )
    )
    plan.add(
        lv.param(
            "max_memory_percent",
            {
                "kind": "float",
                "flag": "--cb-max-memory-percent",
                "low": 0.5,
                "high": 0.95,
                "step": 0.05,
                "shape": "up_to_failure",
                **cb,
            },
            "share of free GPU memory for the KV cache; unset = 0.9",
        )
    )
    plan.add(
        lv.param(
            "compile",
            {"kind": "bool", "flag": "--compile"},
            "torch.compile: a slower start and first requests, maybe faster after",
            unset=False,
        )
    )
