"""Which of an engine's levers a space searches, for this engine version, GPUs and model.

A lever is written only where it can matter and the installed engine takes its flag: CUDA-graph
and memory levers on GPUs; parallel sizes that divide the GPUs and hold the weights; MoE
backends and expert parallelism for MoE models; speculative decoding where the model ships an
MTP/NEXTN head or the command names a draft; patches whose text is in the installed files. The
user's own values are always among the choices (the baseline is their command). Everything left
out is listed with its reason, for the file's comments.
"""

from __future__ import annotations

from typing import Any

from tuner.init._command import LaunchCommand
from tuner.init._host import HostFacts
from tuner.init._plan import INACTIVE, Constraint, Param, Plan, baseline_value
from tuner.patches import PatchSpec

__all__ = ["KNOWN_PATCHES", "choose_levers"]

# Source patches the tuner knows, with the engine versions they were written for (their text is
# checked against the host's installed files before one is offered).
KNOWN_PATCHES: dict[str, list[PatchSpec]] = {
    "sglang": [PatchSpec(
        name="autotune_gate", package="sglang", file="srt/model_executor/model_runner.py",
        description="run FlashInfer autotune for the flashinfer_cutlass MoE backend",
        find='            # TODO: flashinfer_cutlass will cause some flashinfer compilation errors. To be fixed.\n'
             '            # "flashinfer_cutlass",\n',
        replace='            # TODO: flashinfer_cutlass will cause some flashinfer compilation errors. To be fixed.\n'
                '            "flashinfer_cutlass",\n')],
}


class _Levers:
    """The context every lever reads: the command, the host, the engine's flags, the levels."""

    def __init__(self, command: LaunchCommand, facts: HostFacts, levels: list[int]) -> None:
        self.command, self.facts, self.levels = command, facts, levels
        self.plan = Plan()
        self.version = f"{command.engine} {facts.engine_version or '(version unknown)'}"
        self.cap = facts.compute_cap or 0.0
        self.gpus = facts.gpu_count
        self.model = facts.model

    def known(self, flag: str) -> bool:
        if self.facts.flags.known(flag):
            return True
        self.plan.left_out.append(f"{flag}: not a flag of the installed {self.version}")
        return False

    def choices(self, flag: str, wanted: list[Any]) -> list[Any]:
        """``wanted`` that the engine allows (its --help choices), the command's value added."""
        allowed = self.facts.flags.choices(flag)
        kept = [c for c in wanted if allowed is None or str(c) in allowed]
        value = baseline_value(self.command, {"kind": "categorical", "flag": flag})
        if value is not None and value not in kept and str(value) not in map(str, kept):
            kept.append(value)
        return kept

    def param(self, name: str, spec: dict[str, Any], why: str, *, unset: bool = True) -> Param | None:
        """A parameter whose baseline is the command's value (``unset: true`` when the command
        may leave the flag out); None when its flag is unknown to the engine."""
        if spec.get("flag") and not self.known(spec["flag"]):
            return None
        if unset and spec["kind"] in ("int", "float", "categorical", "paired"):
            spec = {**spec, "unset": True}
        value = baseline_value(self.command, spec)
        if spec["kind"] in ("int", "float") and value is not None:
            spec = {**spec, "low": min(spec["low"], value), "high": max(spec["high"], value)}
        if spec["kind"] == "categorical" and value is not None and value not in spec["choices"]:
            spec = {**spec, "choices": [*spec["choices"], value]}
        if spec["kind"] == "categorical" and not spec["choices"]:
            return None
        return Param(name, spec, value, why)

    # -- shared ------------------------------------------------------------------------------

    def fits(self, size: int) -> bool:
        """The weights fit ``size`` GPUs and the attention heads split over them."""
        heads = self.model.attention_heads if self.model else None
        if heads and heads % size:
            return False
        weights, memory = (self.model.weights_gb if self.model else None), self.facts.gpu_memory_gb
        return not (weights and memory and weights / size > memory)

    def parallel_choices(self) -> list[int]:
        return [d for d in range(2, self.gpus + 1) if self.gpus % d == 0 and self.fits(d)]

    def top(self) -> int:
        return max(self.levels)

    def cap_param(self, name: str, flag: str, engine_default: str) -> Param | None:
        value = baseline_value(self.command, {"kind": "int", "flag": flag})
        low = max(1, min(self.levels) // 2) if value is None else max(1, value // 2)
        high = max(2 * self.top(), 2 * (value or 0))
        return self.param(name, {"kind": "int", "flag": flag, "low": low, "high": high, "log": True,
                                 "shape": "saturating"},
                          f"requests running at once: {low}-{high} brackets the levels "
                          f"({', '.join(map(str, self.levels))}); unset = {engine_default}")


def _sglang(lv: _Levers) -> None:
    plan = lv.plan
    plan.add(lv.cap_param("max_running_requests", "--max-running-requests", "chosen by SGLang from the KV pool"))
    if lv.gpus:
        plan.add(lv.param("mem_fraction_static", {"kind": "float", "flag": "--mem-fraction-static", "low": 0.80,
                                                  "high": 0.95, "step": 0.01, "shape": "up_to_failure"},
                          "GPU memory for weights + KV pool: more pool admits more requests, too much "
                          "runs out of memory at CUDA-graph capture (0.80-0.95 is SGLang's usual band)"))
        plan.add(lv.param("cuda_graph", {"kind": "bool", "flag": "--disable-cuda-graph", "when_false": True},
                          "true: decode runs in CUDA graphs (no flag); false: --disable-cuda-graph frees "
                          "their memory for the KV pool", unset=False))
        if lv.plan.has("cuda_graph"):
            sizes = [s for s in (32, 64, 128, 256, 512, 1024) if s <= max(64, 2 * lv.top())][-4:]
            plan.add(lv.param("cuda_graph_max_bs", {"kind": "categorical", "flag": "--cuda-graph-max-bs",
                                                    "choices": sizes, "when": {"cuda_graph": True}},
                              "largest decode batch captured in a graph; a batch above it runs eager; "
                              "unset = SGLang's choice for the GPU"))
    else:
        plan.left_out.append("--mem-fraction-static, --disable-cuda-graph: no GPUs read on the host")
    plan.add(lv.param("chunked_prefill_size", {"kind": "categorical", "flag": "--chunked-prefill-size",
                                               "choices": [2048, 4096, 8192, 16384, -1]},
                      "prompt tokens prefilled per step: smaller interleaves decode better, "
                      "-1 turns chunking off; unset = SGLang's choice for the GPU"))
    plan.add(lv.param("schedule_conservativeness", {"kind": "float", "flag": "--schedule-conservativeness",
                                                    "low": 0.3, "high": 1.5, "step": 0.1},
                      "how much of the KV pool the scheduler keeps for running requests' outputs "
                      "(SGLang's tuning guide: lower it when the pool is under-used); unset = 1.0"))
    attention = ["flashinfer", "triton"]  # on every CUDA GPU
    if 9.0 <= lv.cap < 10.0:
        attention.append("fa3")  # FlashAttention 3 is Hopper-only
    if lv.model and lv.model.mla and 10.0 <= lv.cap < 11.0:
        attention.append("trtllm_mla")
    if lv.gpus:
        plan.add(lv.param("attention_backend", {"kind": "categorical", "flag": "--attention-backend",
                                                "choices": lv.choices("--attention-backend", attention)},
                          f"attention kernels that run on compute capability {_capability(lv)} "
                          "(fa3 only on Hopper); unset = SGLang's choice"))
        if lv.cap >= 8.9:
            plan.add(lv.param("kv_cache_dtype", {"kind": "categorical", "flag": "--kv-cache-dtype",
                                                 "choices": lv.choices("--kv-cache-dtype", ["fp8_e4m3"])},
                              "fp8 KV cache: twice the tokens in the same pool (the probe checks the "
                              "answers stay the same); unset = the model's dtype"))
    plan.add(lv.param("radix_cache", {"kind": "bool", "flag": "--disable-radix-cache", "when_false": True},
                      "true: prefix cache on (no flag); false: --disable-radix-cache (no cache "
                      "bookkeeping, for traffic without shared prefixes)", unset=False))
    _sglang_parallel(lv)
    _sglang_moe(lv)
    _sglang_speculative(lv)


def _capability(lv: _Levers) -> str:
    return f"{lv.cap:g}" if lv.cap else "unknown (the portable kernels only)"


def _memory(lv: _Levers) -> str:
    memory = lv.facts.gpu_memory_gb
    return f"{memory:g} GB" if memory else "memory unknown"


def _sglang_parallel(lv: _Levers) -> None:
    plan = lv.plan
    if lv.gpus < 2:
        plan.left_out.append("--tp-size, --dp-size: fewer than 2 GPUs")
        return
    sizes = lv.parallel_choices()
    fixed = baseline_value(lv.command, {"kind": "int", "flag": "--tp-size"})
    if sizes == [fixed]:
        plan.left_out.append(f"--tp-size: only your {fixed} divides the {lv.gpus} GPUs and holds the weights")
    if sizes and (len(sizes) > 1 or baseline_value(lv.command, {"kind": "int", "flag": "--tp-size"}) in (None, 1)):
        weights = f"{lv.model.weights_gb:g} GB of weights" if lv.model and lv.model.weights_gb else "weights of unknown size"
        plan.add(lv.param("tp_size", {"kind": "categorical", "flag": "--tp-size", "choices": sizes},
                          f"tensor parallel sizes that divide the {lv.gpus} GPUs and hold {weights} "
                          f"({_memory(lv)} a GPU); unset = 1"))
    if lv.model and lv.model.mla and lv.model.moe:
        plan.add(lv.param("dp_attention", {"kind": "store_true", "flag": "--enable-dp-attention"},
                          "attention data-parallel inside the TP group (MLA models): each request's "
                          "cache on one rank, a larger pool; slower at small batches", unset=False))
        if plan.has("dp_attention"):
            dp = [d for d in range(2, lv.gpus + 1) if lv.gpus % d == 0]
            plan.add(lv.param("dp_size", {"kind": "categorical", "flag": "--dp-size", "choices": dp,
                                          "when": {"dp_attention": True}},
                              "attention ranks with DP attention; SGLang asserts tp_size % dp_size == 0"))
            tp = next((p for p in plan.params if p.name == "tp_size"), None)
            for size in [None, *tp.spec["choices"]] if tp and plan.has("dp_size") else []:
                bad = [d for d in dp if (size or 1) % d]
                if bad:
                    plan.constraints.append(Constraint(
                        {"tp_size": size, "dp_size": bad if len(bad) > 1 else bad[0]}, "skip",
                        f"SGLang asserts tp_size % dp_size == 0 with --enable-dp-attention (tp {size})"))


def _sglang_moe(lv: _Levers) -> None:
    plan = lv.plan
    if not (lv.model and lv.model.moe):
        plan.left_out.append("--moe-runner-backend, --ep-size: "
                             + ("a dense model (config.json lists no experts)" if lv.model else "the model's config.json was not read"))
        return
    backends = ["triton"]
    if lv.cap >= 9.0:
        backends.append("flashinfer_cutlass")
    if lv.cap >= 10.0:
        backends.append("flashinfer_trtllm")
    moe = lv.param("moe_runner_backend", {"kind": "categorical", "flag": "--moe-runner-backend",
                                          "choices": lv.choices("--moe-runner-backend", backends)},
                   f"MoE kernels for {lv.model.experts} experts on compute capability {_capability(lv)} "
                   "(flashinfer_trtllm: Blackwell); unset = auto")
    plan.add(moe)
    gate = lv.facts.patches.get("autotune_gate")
    if moe and "flashinfer_cutlass" in moe.spec["choices"]:
        if gate == "clean":
            plan.patches["autotune_gate"] = _patch_doc(KNOWN_PATCHES["sglang"][0])
            plan.add(Param("autotune_gate", {"kind": "patch", "patch": "autotune_gate",
                                             "when": {"moe_runner_backend": "flashinfer_cutlass"}},
                           INACTIVE if moe.baseline != "flashinfer_cutlass" else False,
                           "SGLang 0.5.x leaves flashinfer_cutlass out of FlashInfer autotune; its "
                           "text is in the installed model_runner.py"))
        else:
            plan.left_out.append(f"patch autotune_gate: its text is not in the installed model_runner.py ({gate or 'not read'})")
    tp_fixed = baseline_value(lv.command, {"kind": "int", "flag": "--tp-size"})
    if lv.gpus > 1 and (plan.has("tp_size") or tp_fixed == lv.gpus) and lv.known("--ep-size"):
        plan.add(lv.param("ep_size", {"kind": "categorical", "flag": "--ep-size", "choices": [lv.gpus]},
                          f"expert parallelism over {lv.gpus} GPUs (experts split, not sharded); unset = 1"))
        tp = next((p for p in plan.params if p.name == "tp_size"), None)
        for size in [None, *(tp.spec["choices"] if tp else [])] if tp else []:
            if size is None or size < lv.gpus:
                plan.constraints.append(Constraint({"tp_size": size, "ep_size": lv.gpus}, "skip",
                                                   f"SGLang runs experts over the TP ranks: ep {lv.gpus} needs tp {lv.gpus}"))
    plan.left_out.append("--moe-a2a-backend deepep: needs NVLink or RDMA between the GPUs, which "
                         "nvidia-smi's inventory does not show; add it if yours have it")


def _sglang_speculative(lv: _Levers) -> None:
    plan, cmd = lv.plan, lv.command
    draft = cmd.value("--speculative-draft-model-path")
    if lv.model and lv.model.nextn_layers and not draft:
        algo = lv.param("speculative_algorithm", {"kind": "categorical", "flag": "--speculative-algorithm",
                                                  "choices": lv.choices("--speculative-algorithm", ["NEXTN"])},
                        f"the model ships {lv.model.nextn_layers} MTP/NEXTN layer(s): speculative "
                        "decoding without a separate draft model; unset = off")
        plan.add(algo)
        if algo is None:
            return
        condition: dict[str, Any] = {"speculative_algorithm": algo.spec["choices"]}
    elif draft:
        condition = {}  # the command's own --speculative-algorithm stays fixed
    else:
        plan.left_out.append("speculative decoding: the model has no MTP/NEXTN layers"
                             + ("" if lv.model else " that could be read")
                             + " and the command names no draft model")
        return
    when = {"when": condition} if condition else {}
    plan.add(lv.param("speculative_num_steps", {"kind": "categorical", "flag": "--speculative-num-steps",
                                                "choices": [1, 2, 3, 5], **when},
                      "draft steps per round: more pays at low load, costs at high; unset = SGLang's"))
    plan.add(lv.param("speculative_eagle_topk", {"kind": "categorical", "flag": "--speculative-eagle-topk",
                                                 "choices": [1, 2, 4], **when},
                      "candidates per step (1: a chain); unset = SGLang's"))
    if plan.has("speculative_eagle_topk"):
        plan.add(lv.param("speculative_num_draft_tokens", {
            "kind": "categorical", "flag": "--speculative-num-draft-tokens", "choices": [2, 4, 6, 8],
            "when": {"speculative_eagle_topk": {"gt": 1}}},
            "tokens verified per round; with top-k 1 SGLang sets it to steps + 1 itself"))
        if plan.has("attention_backend"):
            plan.constraints.append(Constraint({"speculative_eagle_topk": {"gt": 1}, "attention_backend": "triton"},
                                               "skip", "SGLang: speculative_eagle_topk > 1 with page_size > 1 "
                                               "runs on the flashinfer backend only"))
    if condition and plan.has("max_running_requests"):
        plan.constraints.append(Constraint({**condition, "max_running_requests": None}, "warn",
                                           "SGLang caps running requests at 48 with speculative decoding "
                                           "when --max-running-requests is unset"))


def _patch_doc(patch: PatchSpec) -> dict[str, str]:
    return {"package": patch.package, "file": patch.file, "description": patch.description,
            "find": patch.find, "replace": patch.replace}


def _vllm(lv: _Levers) -> None:
    plan, cmd = lv.plan, lv.command
    plan.add(lv.cap_param("max_num_seqs", "--max-num-seqs", "vLLM's default (256 on GPUs, 128 on CPU)"))
    tokens = [2048, 4096, 8192, 16384] if lv.gpus else [256, 512, 1024, 2048, 4096]
    plan.add(lv.param("max_num_batched_tokens", {"kind": "categorical", "flag": "--max-num-batched-tokens",
                                                 "choices": tokens},
                      "tokens per engine step: larger prefills faster, smaller keeps decode steps short; "
                      "unset = vLLM's default"))
    if lv.facts.flags.known("--no-enable-chunked-prefill"):
        plan.add(lv.param("chunked_prefill", {"kind": "paired", "flag": "--enable-chunked-prefill"},
                          "--enable-chunked-prefill / --no-enable-chunked-prefill; unset = vLLM's default (on)"))
    if lv.facts.flags.known("--no-enable-prefix-caching"):
        plan.add(lv.param("prefix_caching", {"kind": "paired", "flag": "--enable-prefix-caching"},
                          "--enable-prefix-caching / --no-...; unset = vLLM's default (on)"))
    blocks = [16, 32] if lv.gpus else [32, 64, 128, 256]
    plan.add(lv.param("block_size", {"kind": "categorical", "flag": "--block-size",
                                     "choices": lv.choices("--block-size", blocks)},
                      "KV-cache page in tokens" + ("" if lv.gpus else " (the CPU backend takes multiples of 32)")
                      + "; unset = vLLM's default"))
    if lv.gpus:
        plan.add(lv.param("gpu_memory_utilization", {"kind": "float", "flag": "--gpu-memory-utilization",
                                                     "low": 0.80, "high": 0.95, "step": 0.01,
                                                     "shape": "up_to_failure"},
                          "share of GPU memory vLLM takes (weights + KV cache); unset = 0.9"))
        if not cmd.has("--enforce-eager"):
            plan.add(lv.param("enforce_eager", {"kind": "store_true", "flag": "--enforce-eager"},
                              "true: no CUDA graphs (memory for the KV cache instead of decode speed)",
                              unset=False))
        if lv.cap >= 8.9:
            plan.add(lv.param("kv_cache_dtype", {"kind": "categorical", "flag": "--kv-cache-dtype",
                                                 "choices": lv.choices("--kv-cache-dtype", ["fp8"])},
                              "fp8 KV cache: twice the tokens; unset = the model's dtype"))
        sizes = lv.parallel_choices()
        if lv.gpus > 1 and sizes:
            plan.add(lv.param("tensor_parallel_size", {"kind": "categorical", "flag": "--tensor-parallel-size",
                                                       "choices": sizes},
                              f"sizes that divide the {lv.gpus} GPUs and hold the weights; unset = 1"))
    else:
        plan.left_out.append("--gpu-memory-utilization, --tensor-parallel-size, CUDA graphs: no GPUs read")
    if lv.model and lv.model.nextn_layers:
        plan.left_out.append("--speculative-config (MTP): write it by hand with json_key: parameters "
                             "(search_spaces/vllm-cpu-speculative.yaml shows how)")
    limit = cmd.value("--max-model-len")
    limit = int(limit) if isinstance(limit, str) and limit.isdigit() else (lv.model.max_positions if lv.model else None)
    batched = next((p for p in plan.params if p.name == "max_num_batched_tokens"), None)
    if limit and batched and plan.has("chunked_prefill"):
        small = [c for c in batched.spec["choices"] if c < limit]
        if small:
            plan.constraints.append(Constraint({"chunked_prefill": False, "max_num_batched_tokens": {"lt": limit}},
                                               "skip", f"vLLM refuses to start: max_num_batched_tokens below "
                                               f"max_model_len ({limit}) with chunked prefill off"))


def _transformers(lv: _Levers) -> None:
    plan = lv.plan
    plan.add(lv.param("continuous_batching", {"kind": "bool", "flag": "--continuous-batching"},
                      "paged attention and a batching loop; off serves one request at a time", unset=False))
    plan.add(lv.param("attn_implementation", {"kind": "categorical", "flag": "--attn-implementation",
                                              "choices": ["sdpa", "eager"]},
                      "attention kernels every install has (flash_attention_2/3 need their packages; "
                      "flex_attention fails under continuous batching in 5.17); unset = transformers'"))
    cb = {"when": {"continuous_batching": True}} if plan.has("continuous_batching") else {}
    if lv.gpus:
        plan.add(lv.param("cuda_graph", {"kind": "paired", "flag": "--cb-use-cuda-graph", **cb},
                          "--cb-use-cuda-graph / --no-...; unset = transformers decides"))
    plan.add(lv.param("block_size", {"kind": "categorical", "flag": "--cb-block-size",
                                     "choices": [32, 64, 128, 256, 512], **cb},
                      "KV-cache page in tokens; unset = 256"))
    plan.add(lv.param("num_blocks", {"kind": "categorical", "flag": "--cb-num-blocks",
                                     "choices": [256, 1024, 4096, 16384], **cb},
                      "KV-cache pages; too many for the free memory fails at the first request; "
                      "unset = sized from free memory"))
    plan.add(lv.param("max_batch_tokens", {"kind": "categorical", "flag": "--cb-max-batch-tokens",
                                           "choices": [512, 2048, 8192, 32768], **cb},
                      "tokens per forward pass; unset = sized from free memory"))
    plan.add(lv.param("max_memory_percent", {"kind": "float", "flag": "--cb-max-memory-percent",
                                             "low": 0.5, "high": 0.95, "step": 0.05, "shape": "up_to_failure", **cb},
                      "share of free GPU memory for the KV cache; unset = 0.9"))
    plan.add(lv.param("compile", {"kind": "bool", "flag": "--compile"},
                      "torch.compile: a slower start and first requests, maybe faster after", unset=False))


def _fit(lv: _Levers) -> None:
    model = lv.model
    if lv.command.engine != "sglang" or lv.gpus < 2 or not (model and model.weights_gb and lv.facts.gpu_memory_gb):
        return
    lv.plan.fit = {"weights_gb": model.weights_gb, "gpu_memory_gb": lv.facts.gpu_memory_gb, "gpus": lv.gpus,
                   **({"attention_heads": model.attention_heads} if model.attention_heads else {})}
    lv.plan.fit_why = ("read from the host: the weights' size on disk, nvidia-smi's memory.total and "
                       "count, config.json's num_attention_heads")


def _settle(plan: Plan, command: LaunchCommand) -> None:
    """Mark parameters whose ``when:`` fails for the command as inactive at the baseline, and
    drop those (and what reads them) whose flag the command sets although they are inactive:
    such a flag stays fixed, as the user gave it."""
    values: dict[str, Any] = {}
    kept: list[Param] = []
    for param in plan.params:
        when = param.spec.get("when", {})
        if any(name not in values for name in when):
            continue
        active = all(_holds(values[name], test) for name, test in when.items())
        if not active and any(command.has(flag) for flag in param.flags):
            continue
        value = param.baseline if active else INACTIVE
        if active and value is INACTIVE:
            value = False
        values[param.name] = value
        kept.append(Param(param.name, param.spec, value, param.why))
    plan.params = kept
    names = {p.name for p in kept}
    plan.constraints = [c for c in plan.constraints if all(n in names for n in c.when)]
    plan.patches = {n: p for n, p in plan.patches.items() if any(q.spec.get("patch") == n for q in kept)}


def _holds(value: Any, test: Any) -> bool:
    if value is INACTIVE:
        return False
    if isinstance(test, dict):
        return all({"gt": lambda a, b: a is not None and a > b, "lt": lambda a, b: a is not None and a < b}[op](value, bound)
                   for op, bound in test.items())
    if isinstance(test, list):
        return value in test
    return value == test


def choose_levers(command: LaunchCommand, facts: HostFacts, levels: list[int]) -> Plan:
    """The parameters, patches, constraints and fit of the space for ``command`` on this host."""
    lv = _Levers(command, facts, levels)
    {"sglang": _sglang, "vllm": _vllm, "transformers": _transformers}[command.engine](lv)
    _fit(lv)
    _settle(lv.plan, command)
    return lv.plan
