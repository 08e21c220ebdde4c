"""Which of an engine's levers a space searches, for this engine version, GPUs and model.

A lever is written only where it can matter and the installed engine takes its flag: CUDA-graph
and memory levers on GPUs; parallel sizes that divide the GPUs and hold the weights, and
data-parallel replicas where one needs fewer GPUs than the host has; MoE backends and expert
parallelism for MoE models; speculative decoding where the model ships an
MTP/NEXTN head or the command names a draft; patches whose text is in the installed files. The
user's own values are always among the choices (the baseline is their command). Everything left
out is listed with its reason, for the file's comments. The engines' levers live in
:mod:`._sglang_levers` and :mod:`._engine_levers`; here they are settled against the command.
"""

from __future__ import annotations

from typing import Any

from tuner.engines import load_profile
from tuner.init._command import LaunchCommand
from tuner.init._context import LeverContext
from tuner.init._engine_levers import transformers_levers, vllm_levers
from tuner.init._host import HostFacts
from tuner.init._plan import INACTIVE, Param, Plan
from tuner.init._sglang_levers import KNOWN_PATCHES, sglang_levers

__all__ = ["KNOWN_PATCHES", "choose_levers"]


def _fit(lv: LeverContext) -> None:
    model = lv.model
    if (
        not load_profile(lv.command.engine).parallel_flags  # the profile reads no layout
        or lv.gpus < 2
        or not (model and model.weights_gb and lv.facts.gpu_memory_gb)
    ):
        return
    lv.plan.fit = {
        "weights_gb": model.weights_gb,
        "gpu_memory_gb": lv.facts.gpu_memory_gb,
        "gpus": lv.gpus,
        **({"attention_heads": model.attention_heads} if model.attention_heads else {}),
    }
    lv.plan.fit_why = (
        "read from the host: the weights' size on disk, nvidia-smi's memory.total and "
        "count, config.json's num_attention_heads"
    )


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
    plan.patches = {
        n: p for n, p in plan.patches.items() if any(q.spec.get("patch") == n for q in kept)
    }


def _holds(value: Any, test: Any) -> bool:
    if value is INACTIVE:
        return False
    if isinstance(test, dict):
        return all(
            {
                "gt": lambda a, b: a is not None and a > b,
                "lt": lambda a, b: a is not None and a < b,
            }[op](value, bound)
            for op, bound in test.items()
        )
    if isinstance(test, list):
        return value in test
    return value == test


def choose_levers(command: LaunchCommand, facts: HostFacts, levels: list[int]) -> Plan:
    """The parameters, patches, constraints and fit of the space for ``command`` on this host."""
    lv = LeverContext(command, facts, levels)
    {"sglang": sglang_levers, "vllm": vllm_levers, "transformers": transformers_levers}[
        command.engine
    ](lv)
    _fit(lv)
    _settle(lv.plan, command)
    return lv.plan
