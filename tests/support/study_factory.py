"""A synthetic but complete study in real Optuna SQLite storage, shaped like the trial loop's.

The study holds what ``tuner optimize`` writes (see ``tuner/study/trial/_runner.py`` and
``tuner/study/loop/_optimize.py``): a baseline, completed trials with four levels and GPU telemetry, trials pruned by
the baseline and by a constraint, and failures of several reason classes with partial levels. The
figures come from a small made-up performance model (not the calibration table): the backend sets
the peak, CUDA graphs and the autotune patch help, ``max_running_requests`` caps the curve. So the
report's importances and failure groups have something real to find.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState

from tuner.study.record import level_figures

LEVELS = (64, 256, 512, 1024)
INPUT_LEN = OUTPUT_LEN = 256
POWER_LIMIT_W = 600.0
STUDY_NAME = "glm5-synthetic"

DISTRIBUTIONS: dict[str, BaseDistribution] = {
    "moe_runner_backend": CategoricalDistribution(
        ["flashinfer_trtllm", "flashinfer_cutlass", "triton"]
    ),
    "attention_backend": CategoricalDistribution(["flashinfer", "triton", "fa3"]),
    "disable_cuda_graph": CategoricalDistribution([False, True]),
    "cuda_graph_max_bs": CategoricalDistribution([128, 256, 512]),  # only with CUDA graphs on
    "max_running_requests": CategoricalDistribution([64, 256, 1024, None]),
    "mem_fraction_static": FloatDistribution(0.85, 0.97, step=0.01),
    "chunked_prefill_size": IntDistribution(2048, 16384, step=2048),
    "autotune_gate_patch": CategoricalDistribution([False, True]),
}

BASELINE: dict[str, Any] = {
    "moe_runner_backend": "flashinfer_trtllm",
    "attention_backend": "flashinfer",
    "disable_cuda_graph": False,
    "cuda_graph_max_bs": 256,
    "max_running_requests": 64,
    "mem_fraction_static": 0.92,
    "chunked_prefill_size": 8192,
    "autotune_gate_patch": False,
}

PEAK_BY_BACKEND = {"flashinfer_trtllm": 2900.0, "flashinfer_cutlass": 3600.0, "triton": 1500.0}
# How often the random draws pick the choices that break the server (so most trials measure).
RISKY_CHOICE_WEIGHT = {"attention_backend": {"fa3": 0.06}, "disable_cuda_graph": {True: 0.15}}


@dataclass(frozen=True)
class Outcome:
    """What the made-up host does with one configuration."""

    state: TrialState
    levels: list[dict[str, Any]]
    reason: str | None = None
    detail: str | None = None


def level_dict(
    concurrency: int,
    tps: float,
    *,
    cap: int | None,
    failed: int = 0,
    stop_reason: str | None = None,
    power_w: float | None = None,
) -> dict[str, Any]:
    """One level as ``LevelMetrics.to_dict()`` writes it, with a GPU summary when ``power_w``."""
    num_requests = max(128, 2 * concurrency)
    completed = num_requests - failed
    in_flight = min(concurrency, cap or concurrency)
    duration = completed * OUTPUT_LEN / tps
    tpot = 1000.0 * in_flight / tps
    ttft = 40.0 + 2.0 * in_flight + (900.0 * (concurrency / in_flight - 1.0))
    level: dict[str, Any] = {
        "concurrency": concurrency,
        "num_requests": num_requests,
        "completed": completed,
        "failed": failed,
        "duration_s": round(duration, 2),
        "input_tokens": completed * INPUT_LEN,
        "output_tokens": completed * OUTPUT_LEN,
        "output_throughput": round(tps, 1),
        "total_throughput": round(2 * tps, 1),
        "request_throughput": round(completed / duration, 3),
        "max_output_tokens_per_s": round(tps * 1.06, 1),
        "stop_reason": stop_reason,
        "emulated": True,
        "time_scale": 50.0,
        "errors": [],
    }
    for kind, median in (
        ("ttft", ttft),
        ("tpot", tpot),
        ("itl", tpot * 0.97),
        ("e2e", ttft + tpot * OUTPUT_LEN),
    ):
        for stat, factor in (("mean", 1.05), ("median", 1.0), ("p90", 1.6), ("p99", 2.4)):
            level[f"{stat}_{kind}_ms"] = round(median * factor, 2)
    if power_w is not None:
        level["gpu"] = {
            "mean_power_w": round(power_w, 1),
            "max_power_w": round(power_w * 1.12, 1),
            "power_limit_w": POWER_LIMIT_W,
            "mean_util_pct": round(min(99.0, 60 + tps / 90), 1),
            "max_util_pct": 100.0,
            "gpus": 8,
            "samples": 40,
        }
    return level


def simulate(config: dict[str, Any]) -> Outcome:
    """The made-up host: peak from the backend, capped by max_running_requests."""
    if config["mem_fraction_static"] >= 0.96:
        return Outcome(
            TrialState.FAIL, [], "oom-at-start", "Capture cuda graph failed: CUDA out of memory"
        )
    peak = PEAK_BY_BACKEND[config["moe_runner_backend"]]
    peak *= 1.2 if config["autotune_gate_patch"] else 1.0
    peak *= (
        0.85
        if config["disable_cuda_graph"]
        else 1.0 + (config.get("cuda_graph_max_bs") or 0) / 5120
    )
    peak *= 1.0 + (config["chunked_prefill_size"] - 8192) / 80000
    cap = config["max_running_requests"]
    levels: list[dict[str, Any]] = []
    for concurrency in LEVELS:
        in_flight = min(concurrency, cap or concurrency)
        tps = peak * in_flight / (in_flight + 220.0)
        if config["disable_cuda_graph"] and concurrency >= 512:
            levels.append(
                level_dict(
                    concurrency,
                    tps * 0.3,
                    cap=cap,
                    failed=700,
                    stop_reason="server crashed: SIGQUIT received",
                    power_w=240.0,
                )
            )
            return Outcome(
                TrialState.FAIL,
                levels,
                f"unstable-at-{concurrency}",
                "AttributeError: 'PrefillMetadata' object has no attribute 'topk_indices'",
            )
        levels.append(level_dict(concurrency, tps, cap=cap, power_w=228.0 + tps / 90))
        if config["attention_backend"] == "fa3":
            return Outcome(
                TrialState.FAIL, [], "wrong-output", "0 of 4 probe outputs match the baseline's"
            )
    return Outcome(TrialState.COMPLETE, levels)


def _command_line(config: dict[str, Any]) -> str:
    flags = [
        f"--{name.replace('_', '-')} {value}"
        for name, value in config.items()
        if name != "autotune_gate_patch" and value not in (None, False)
    ]
    return "python -m sglang.launch_server --model-path /models/glm5 --tp-size 8 " + " ".join(
        f.removesuffix(" True") for f in flags
    )


def _sample(rng: random.Random) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for name, dist in DISTRIBUTIONS.items():
        if name == "cuda_graph_max_bs" and config["disable_cuda_graph"]:
            continue
        if isinstance(dist, CategoricalDistribution):
            risky = RISKY_CHOICE_WEIGHT.get(name, {})
            weights = [risky.get(c, 1.0) for c in dist.choices]
            config[name] = rng.choices(dist.choices, weights=weights)[0]
        elif isinstance(dist, FloatDistribution):
            config[name] = rng.choices([0.88, 0.9, 0.92, 0.94, 0.97], weights=[1, 1, 1, 1, 0.2])[0]
        else:
            config[name] = rng.randrange(dist.low, dist.high + 1, dist.step)
    return config


def _frozen(
    number: int,
    config: dict[str, Any],
    baseline_levels: dict[int, float] | None,
    *,
    is_baseline: bool = False,
) -> optuna.trial.FrozenTrial:
    outcome = simulate(config)
    state, levels = outcome.state, outcome.levels
    user_attrs: dict[str, Any] = {
        "config": config,
        "config_key": json.dumps(config, sort_keys=True),
        "is_baseline": is_baseline,
        "command_line": _command_line(config),
        "env": {"HF_TOKEN": "***"},
        "patches": ["autotune_gate"] if config["autotune_gate_patch"] else [],
        "host": "local",
        "worker": "testhost:4242",
        "emulated": True,
        "ready_s": 205.0,
        "host_seconds": 260.0 + 30 * len(levels),
    }
    clean = {
        lv["concurrency"]: lv["output_throughput"] for lv in levels if lv["stop_reason"] is None
    }
    if levels:
        user_attrs["levels"] = levels
        for level in levels:
            user_attrs.update(level_figures(level))
        user_attrs["telemetry"] = {
            str(lv["concurrency"]): lv["gpu"] for lv in levels if "gpu" in lv
        }
    if (
        state == TrialState.COMPLETE
        and baseline_levels
        and not is_baseline
        and all(clean[c] < 0.9 * baseline_levels[c] for c in list(clean)[:2])
    ):
        state, levels = TrialState.PRUNED, levels[:2]
        clean = {c: clean[c] for c in list(clean)[:2]}
        user_attrs["levels"] = levels
        for key in [k for k in user_attrs if "@" in k and not k.endswith(("@64", "@256"))]:
            del user_attrs[key]
        user_attrs["pruned_reason"] = (
            "below the baseline by more than 10% at every level so far (up to 256 concurrent)"
        )
        user_attrs["pruned_by"] = "baseline"
    if state == TrialState.FAIL:
        user_attrs["failure_reason"] = outcome.reason
        user_attrs["failure_detail"] = outcome.detail
        user_attrs["failure_excerpt"] = f"[scheduler] {outcome.detail}\nSIGQUIT received"
    if state == TrialState.COMPLETE:
        user_attrs["stable"] = True
    params = {k: v for k, v in config.items()}
    return optuna.trial.create_trial(
        state=state,
        value=max(clean.values()) if state == TrialState.COMPLETE else None,
        params=params,
        distributions={k: DISTRIBUTIONS[k] for k in params},
        user_attrs=user_attrs,
        intermediate_values=clean,
    )


def constraint_pruned(config: dict[str, Any]) -> optuna.trial.FrozenTrial:
    """A configuration a constraint excluded: PRUNED, no levels, no host time."""
    return optuna.trial.create_trial(
        state=TrialState.PRUNED,
        params=config,
        distributions={k: DISTRIBUTIONS[k] for k in config},
        user_attrs={
            "config": config,
            "config_key": json.dumps(config, sort_keys=True),
            "is_baseline": False,
            "pruned_reason": "constraint: cuda_graph_max_bs above max_running_requests",
            "pruned_by": "constraint",
            "emulated": True,
        },
    )


def make_study(
    url: str,
    *,
    n_sampled: int = 16,
    seed: int = 7,
    emulated: bool = True,
    study_name: str = STUDY_NAME,
) -> optuna.Study:
    """Create the study in ``url`` (e.g. ``sqlite:///tmp/x.db``) and return it."""
    study = optuna.create_study(storage=url, study_name=study_name, direction="maximize")
    attrs = {
        "tuner_fingerprint": "f" * 64,
        "space_file": "search_spaces/glm5.yaml",
        "engine": "sglang",
        "emulated": emulated,
        "time_scale": 50.0 if emulated else 1.0,
        "host": "local",
        "probe_reference": ["Paris", "4", "blue", "1789"],
    }
    for key, value in attrs.items():
        study.set_user_attr(key, value)
    baseline = _frozen(0, dict(BASELINE), None, is_baseline=True)
    rng = random.Random(seed)
    fixed = [
        {
            **BASELINE,
            "moe_runner_backend": "flashinfer_cutlass",
            "max_running_requests": None,
            "autotune_gate_patch": True,
        },
        {
            **BASELINE,
            "moe_runner_backend": "flashinfer_cutlass",
            "max_running_requests": None,
            "disable_cuda_graph": True,
        },
        {**BASELINE, "attention_backend": "fa3", "max_running_requests": 1024},
        {**BASELINE, "mem_fraction_static": 0.97},
    ]
    trials = [baseline]
    for config in fixed:
        config = dict(config)
        if config["disable_cuda_graph"]:
            config.pop("cuda_graph_max_bs")
        trials.append(_frozen(len(trials), config, baseline.intermediate_values))
    trials.append(
        constraint_pruned({**BASELINE, "cuda_graph_max_bs": 512, "max_running_requests": 64})
    )
    trials += [
        _frozen(len(trials), _sample(rng), baseline.intermediate_values) for _ in range(n_sampled)
    ]
    best = max((t for t in trials if t.state == TrialState.COMPLETE), key=lambda t: t.value)
    best.user_attrs = {
        **best.user_attrs,
        "validation": {
            "stable": True,
            "runs": 3,
            "mean_output_throughput": round(best.value * 0.99, 1),
            "std_output_throughput": round(best.value * 0.012, 1),
            "duration_s": 600.0,
        },
    }
    study.add_trials(trials)
    return study
