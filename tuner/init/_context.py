"""What every engine's lever choice reads: the command, the host as read, the engine's flags
and the levels; and how a parameter is made from a lever (the user's value as its baseline, and
inside its range)."""

from __future__ import annotations

from typing import Any

from tuner.init._command import LaunchCommand
from tuner.init._host import HostFacts, ModelFacts
from tuner.init._plan import Param, Plan, baseline_value

__all__ = ["LeverContext", "capability", "memory"]


class LeverContext:
    """The context every lever reads: the command, the host, the engine's flags, the levels."""

    def __init__(self, command: LaunchCommand, facts: HostFacts, levels: list[int]) -> None:
        self.command, self.facts, self.levels = command, facts, levels
        self.plan = Plan()
        self.version = f"{command.engine} {facts.engine_version or '(version unknown)'}"
        self.cap = facts.compute_cap or 0.0
        self.gpus = facts.gpu_count
        self.model = facts.model

    def moe_model(self, levers: str) -> ModelFacts | None:
        """The model when it is MoE; else None, with ``levers`` (flags, in words) left out and
        why (a dense model, or its config.json not read)."""
        if self.model and self.model.moe:
            return self.model
        why = (
            "a dense model (config.json lists no experts)"
            if self.model
            else "the model's config.json was not read"
        )
        self.plan.left_out.append(f"{levers}: {why}")
        return None

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

    def param(
        self, name: str, spec: dict[str, Any], why: str, *, unset: bool = True
    ) -> Param | None:
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
        return self.unfit(size) is None

    def unfit(self, size: int) -> str | None:
        """Why the weights do not fit ``size`` GPUs or the attention heads do not split over
        them, with the arithmetic; None when they do (or the sizes were not read)."""
        heads = self.model.attention_heads if self.model else None
        if heads and heads % size:
            return f"{heads} attention heads do not split over {size} GPUs"
        weights, memory = (self.model.weights_gb if self.model else None), self.facts.gpu_memory_gb
        if weights and memory and weights / size > memory:
            return f"{weights:g} GB of weights / {size} = {weights / size:.1f} GB > {memory:g} GB a GPU"
        return None

    def parallel_choices(self) -> list[int]:
        return [d for d in range(2, self.gpus + 1) if self.gpus % d == 0 and self.fits(d)]

    def top(self) -> int:
        return max(self.levels)

    def cap_param(self, name: str, flag: str, engine_default: str) -> Param | None:
        value = baseline_value(self.command, {"kind": "int", "flag": flag})
        low = max(1, min(self.levels) // 2) if value is None else max(1, value // 2)
        high = max(2 * self.top(), 2 * (value or 0))
        return self.param(
            name,
            {
                "kind": "int",
                "flag": flag,
                "low": low,
                "high": high,
                "log": True,
                "shape": "saturating",
            },
            f"requests running at once: {low}-{high} brackets the levels "
            f"({', '.join(map(str, self.levels))}); unset = {engine_default}",
        )


def capability(lv: LeverContext) -> str:
    """The GPUs' compute capability for a comment."""
    return f"{lv.cap:g}" if lv.cap else "unknown (the portable kernels only)"


def memory(lv: LeverContext) -> str:
    """One GPU's memory for a comment."""
    gib = lv.facts.gpu_memory_gb
    return f"{gib:g} GB" if gib else "memory unknown"
