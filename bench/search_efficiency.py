"""How many host-run trials each search strategy needs to reach 95% of the best throughput.

Every configuration is scored by the emulated host's performance model
(:func:`tuner.emulator.perf_model.predict_throughput`, the model the emulated server paces its
tokens with) on the study's emulated workload (levels 64/256/512/1024), without HTTP, so that a
whole comparison takes minutes. What the model says fails, fails as on the emulated host: at
start (``startup-crash``, ``oom-at-start``), under load (``unstable-at-<c>``, with the levels
before kept) or with garbage output (``wrong-output``, caught by the probe before any level).
Each run draws the emulator's noise (2% a run, 1% a level) for what the optimizer sees; whether
a trial reached the target is judged on the noise-free value of its configuration.

Strategies:

- ``default``: the tuner's own loop (:func:`tuner.study.optimize.optimize_study`) with the
  sampler ``make_sampler("tpe", seed)``, the baseline enqueued first, constraints skipping,
  duplicates reused, failures FAIL with their class, the baseline pruning rule, and the
  feasibility gate (:mod:`tuner.study.feasibility`);
- ``random``: the same loop with ``make_sampler("random", seed)`` and no gate;
- ``one-at-a-time``: SGLang auto_benchmark's tier 1: from the baseline, sweep each parameter's
  values (numbers on a grid) keeping the best so far, pass after pass until a pass gains nothing.

The target is 95% of the best stable throughput found by any strategy, checked by a
coordinate-ascent polish of that best configuration on the noise-free model.

    python bench/search_efficiency.py --seeds 10 --out docs/search-efficiency.md
"""

from __future__ import annotations

import argparse
import io
import math
import multiprocessing
import random
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.samplers._tpe.sampler import hyperopt_default_gamma
from optuna.trial import TrialState
from rich.console import Console

from tuner.emulator.cli_args import parse_server_args
from tuner.emulator.perf_model import Failure, predict_throughput
from tuner.errors import ConfigError, ServerFailure
from tuner.space import Config, load_space
from tuner.study import attrs
from tuner.study.feasibility import FeasibilityCheck
from tuner.study.optimize import optimize_study
from tuner.study.progress import ProgressView
from tuner.study.pruner import BaselinePruner
from tuner.study.storage import make_sampler

__all__ = ["ModelHost", "ModelRunner", "host_runs", "main", "reach", "run_loop", "run_sweep"]

REPO = Path(__file__).resolve().parents[1]
SPACE = REPO / "search_spaces" / "glm5.yaml"
REACH = 0.95
_START_FAILURES = {
    "refused": "startup-crash",
    "startup-crash": "startup-crash",
    "oom-at-start": "oom-at-start",
    "wrong-output": "wrong-output",
}


@dataclass(frozen=True)
class Outcome:
    """What the emulated host does with one configuration (noise-free)."""

    levels: tuple[tuple[int, float], ...]  # (concurrency, output tok/s) of the levels that ran
    failure: str | None  # the tuner's failure class, or None when every level ran clean

    @property
    def value(self) -> float | None:
        """The objective: the best level's throughput, None when the trial fails."""
        return None if self.failure else max(tps for _, tps in self.levels)


class ModelHost:
    """The emulated host's performance model over one search space, cached by configuration."""

    def __init__(self, space: Any) -> None:
        self.space = space
        self.workload = space.workload_for(True)
        self._cache: dict[str, Outcome] = {}

    def outcome(self, config: Config) -> Outcome:
        key = config.key()
        if key not in self._cache:
            self._cache[key] = self._evaluate(config)
        return self._cache[key]

    def _evaluate(self, config: Config) -> Outcome:
        launch = self.space.render(config, command="sglang", local=True)
        args = parse_server_args(launch.argv[1:])
        gate, forced = (
            "autotune_gate" in launch.patches,
            "force_allreduce_fusion" in launch.patches,
        )
        levels: list[tuple[int, float]] = []
        for concurrency in self.workload.levels:
            result = predict_throughput(
                args,
                gate,
                forced,
                concurrency,
                self.workload.input_len,
                self.workload.output_len,
                num_requests=self.workload.requests_for(concurrency),
            )
            if isinstance(result, Failure):
                if result.kind in _START_FAILURES:
                    return Outcome((), _START_FAILURES[result.kind])
                return Outcome(tuple(levels), f"unstable-at-{concurrency}")
            levels.append((concurrency, result))
        return Outcome(tuple(levels), None)

    def measured(self, config: Config, rng: random.Random) -> Outcome:
        """The outcome as one run measures it: the emulator's run and level noise applied."""
        true = self.outcome(config)
        run = 1.0 + max(-0.04, min(0.04, rng.gauss(0.0, 0.02)))
        levels = tuple(
            (c, tps / (run * (1.0 + max(-0.025, min(0.025, rng.gauss(0.0, 0.01))))))
            for c, tps in true.levels
        )
        return Outcome(levels, true.failure)


@dataclass(frozen=True)
class _ModelHostName:
    name: str = "performance-model"


@dataclass(frozen=True)
class _ModelTarget:
    """What the optimize loop reads from a target, for a host that is a model."""

    host: _ModelHostName = field(default_factory=_ModelHostName)
    emulated: bool = True
    command: str = "sglang"
    port: int = 30000
    local: bool = True


class ModelRunner:
    """A trial runner whose host is the performance model (same outcomes as TrialRunner)."""

    def __init__(self, host: ModelHost, seed: int) -> None:
        self.host, self.seed = host, seed
        self.target = _ModelTarget()
        self.on_phase = self.on_level = lambda *args: None

    def run(self, trial: optuna.Trial, config: Config, launch: Any) -> list[float]:
        outcome = self.host.measured(config, random.Random(f"{self.seed}:{trial.number}"))
        if not outcome.levels and outcome.failure:
            raise ServerFailure(outcome.failure, "performance model")
        levels: list[dict[str, Any]] = []
        for concurrency, tps in outcome.levels:
            levels.append(
                {
                    "concurrency": concurrency,
                    "output_throughput": tps,
                    "completed": self.host.workload.requests_for(concurrency),
                    "failed": 0,
                    "stop_reason": None,
                }
            )
            attrs.set(trial, "levels", levels)
            trial.report(tps, step=concurrency)
            if trial.should_prune():
                raise optuna.TrialPruned("below the baseline at every level so far")
        if outcome.failure:
            raise ServerFailure(outcome.failure, "performance model")
        attrs.set(trial, "stable", True)
        return [max(tps for _, tps in outcome.levels)]


def tpe_variant(seed: int, overrides: dict[str, Any]) -> optuna.samplers.BaseSampler:
    """``make_sampler("tpe", seed)``, or with ``overrides`` of TPESampler's arguments (for
    trying settings: these start from make_sampler's, written again here)."""
    if not overrides:
        return make_sampler("tpe", seed)
    settings: dict[str, Any] = {
        "multivariate": True,
        "group": True,
        "n_startup_trials": 6,
        "constant_liar": True,
    }
    for name, value in overrides.items():
        settings[name] = hyperopt_default_gamma if value == "hyperopt" else value
    return optuna.samplers.TPESampler(seed=seed, **settings)


def run_loop(
    space: Any,
    host: ModelHost,
    sampler: str,
    seed: int,
    budget: int,
    gate: bool,
    tpe: dict[str, Any] | None = None,
) -> optuna.Study:
    """The tuner's optimize loop on the model for ``budget`` host-run trials (in memory)."""
    chosen = tpe_variant(seed, tpe or {}) if sampler == "tpe" else make_sampler(sampler, seed)
    study = optuna.create_study(
        direction="maximize", sampler=chosen, pruner=BaselinePruner(space.objective.prune_margin)
    )
    check = FeasibilityCheck.from_study(study, space) if gate else None
    progress = ProgressView(Console(file=io.StringIO()))
    optimize_study(study, space, ModelRunner(host, seed), budget, progress, feasibility=check)
    return study


def host_runs(study: optuna.Study) -> list[Config]:
    """The configurations a study ran on the host, in order (not skipped, not reused)."""
    ran = []
    for trial in study.get_trials(deepcopy=False):
        ua = trial.user_attrs
        if trial.state == TrialState.PRUNED and ua.get("pruned_by") != "baseline":
            continue
        if "reused_from" not in ua and "config" in ua:
            ran.append(Config(ua["config"]))
    return ran


def _grid(param: Any) -> list[Any]:
    """The values a one-flag-at-a-time sweep tries for one parameter."""
    if not (hasattr(param, "low") and hasattr(param, "high")):
        return list(param.options())
    if getattr(param, "log", False):
        values = [int(param.low * 2**k) for k in range(int(math.log2(param.high / param.low)) + 1)]
    else:
        count = round((param.high - param.low) / param.step)
        values = [
            param.grid.normalize(param.low + k * param.step)
            if hasattr(param, "grid")
            else param.low + k * param.step
            for k in range(count + 1)
        ]
    return values + ([None] if param.unset else [])


def _natural_default(param: Any) -> Any:
    """The value a parameter takes when a sweep makes it active: its default, else unset where
    allowed, else its first option (``autotune_gate: false`` when the cutlass MoE is chosen)."""
    if param.has_default:
        return param.default
    if getattr(param, "unset", False):
        return None
    return param.low if hasattr(param, "low") else param.options()[0]


def with_value(space: Any, config: Config, name: str, value: Any) -> Config | None:
    """``config`` with one parameter changed (parameters it makes active take their natural
    default), or None when the space refuses it."""
    defaults = {n: _natural_default(p) for n, p in space.parameters.items()}
    try:
        return space.config({**defaults, **dict(config), name: value}, drop_inactive=True)
    except ConfigError:  # a value the space refuses here (e.g. of an inactive parameter)
        return None


def run_sweep(space: Any, host: ModelHost, seed: int, max_trials: int = 300) -> list[Config]:
    """SGLang auto_benchmark tier 1 on the model: one parameter at a time, best kept."""
    rng = random.Random(f"sweep:{seed}")
    ran: list[Config] = []
    measured: dict[str, float | None] = {}

    def measure(config: Config) -> float | None:
        if config.key() not in measured:
            ran.append(config)
            measured[config.key()] = host.measured(config, rng).value
        return measured[config.key()]

    best, best_value = space.baseline, measure(space.baseline)
    improved = True
    while improved and len(ran) < max_trials:
        improved = False
        for name, param in space.parameters.items():
            if name not in best:
                continue
            for value in _grid(param):
                config = with_value(space, best, name, value)
                if config is None or any(
                    v.action == "skip" for v in space.constraint_violations(config)
                ):
                    continue
                result = measure(config)
                if result is not None and (best_value is None or result > best_value):
                    best, best_value, improved = config, result, True
    return ran


def reach(ran: list[Config], host: ModelHost, target: float) -> int | None:
    """The 1-based count of host-run trials until one reached ``REACH`` x target (None: never)."""
    for index, config in enumerate(ran, start=1):
        value = host.outcome(config).value
        if value is not None and value >= REACH * target:
            return index
    return None


STRATEGIES = ("default", "random", "one-at-a-time")


def _seeds_job(
    job: tuple[list[int], int, int, dict[str, Any], bool],
) -> list[dict[str, list[dict[str, Any]]]]:
    """Every strategy on each of these seeds (one model cache for all of them); for each seed,
    the configurations each strategy ran, in order (plain dicts)."""
    seeds, default_budget, random_budget, tpe, gate = job
    space = load_space(SPACE)
    host = ModelHost(space)
    results = []
    for seed in seeds:
        runs = {
            "default": host_runs(run_loop(space, host, "tpe", seed, default_budget, gate, tpe)),
            "random": host_runs(run_loop(space, host, "random", seed, random_budget, False)),
            "one-at-a-time": run_sweep(space, host, seed),
        }
        results.append({name: [c.to_dict() for c in configs] for name, configs in runs.items()})
    return results


def polish(space: Any, host: ModelHost, config: Config) -> tuple[Config, float]:
    """Coordinate ascent on the noise-free model from ``config``: its best neighbourhood."""
    best, best_value = config, host.outcome(config).value or 0.0
    improved = True
    while improved:
        improved = False
        for name, param in space.parameters.items():
            if name not in best:
                continue
            for value in _grid(param):
                candidate = with_value(space, best, name, value)
                if candidate is None or any(
                    v.action == "skip" for v in space.constraint_violations(candidate)
                ):
                    continue
                value_now = host.outcome(candidate).value
                if value_now is not None and value_now > best_value * 1.0001:
                    best, best_value, improved = candidate, value_now, True
    return best, best_value


def _cell(trials: int | None, budget: int) -> str:
    return str(trials) if trials is not None else f">{budget}"


def table(results: dict[str, list[int | None]], budgets: dict[str, int]) -> str:
    """The Markdown table: strategy, median trials, per-seed trials, ratio vs random."""
    medians = {
        name: statistics.median(budgets[name] + 1 if t is None else t for t in trials)
        for name, trials in results.items()
    }
    random_censored = any(t is None for t in results["random"])
    lines = [
        "| strategy | median trials to 95% | per seed | trials vs random |",
        "|---|---|---|---|",
    ]
    for name, trials in results.items():
        per_seed = ", ".join(_cell(t, budgets[name]) for t in trials)
        ratio = medians["random"] / medians[name]
        if name == "random":
            shown = "1x"
        elif all(t is None for t in trials):
            shown = "never reached"
        elif ratio >= 1:
            shown = f"{'>= ' if random_censored else ''}{ratio:.1f}x fewer"
        else:
            shown = f"{1 / ratio:.1f}x more"
        lines.append(f"| {name} | {medians[name]:g} | {per_seed} | {shown} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the comparison, print the table and write it (with how it was measured)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--default-budget", type=int, default=80)
    parser.add_argument("--random-budget", type=int, default=300)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument(
        "--tpe",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a TPESampler argument changed for the default strategy "
        "(prior_weight=0.5, n_startup_trials=10, gamma=hyperopt)",
    )
    parser.add_argument(
        "--no-gate", action="store_true", help="the default strategy without the feasibility gate"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write the table into this Markdown file (between its bench markers)",
    )
    options = parser.parse_args(argv)
    tpe = {name: _literal(value) for name, _, value in (o.partition("=") for o in options.tpe)}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    started = time.monotonic()
    seeds = list(range(options.first_seed, options.first_seed + options.seeds))
    groups = [seeds[k :: options.processes] for k in range(options.processes)]
    jobs = [
        (group, options.default_budget, options.random_budget, tpe, not options.no_gate)
        for group in groups
        if group
    ]
    with multiprocessing.get_context("fork").Pool(len(jobs)) as pool:
        by_seed = {
            seed: runs
            for (seeds, *_), results in zip(jobs, pool.map(_seeds_job, jobs))
            for seed, runs in zip(seeds, results)
        }
    per_seed = [by_seed[seed] for seed in seeds]
    space = load_space(SPACE)
    host = ModelHost(space)
    everything = [Config(c) for runs in per_seed for configs in runs.values() for c in configs]
    found = max(everything, key=lambda c: host.outcome(c).value or 0.0)
    best, target = polish(space, host, found)
    budgets = {
        "default": options.default_budget,
        "random": options.random_budget,
        "one-at-a-time": max(len(runs["one-at-a-time"]) for runs in per_seed),
    }
    results = {
        name: [reach([Config(c) for c in runs[name]], host, target) for runs in per_seed]
        for name in STRATEGIES
    }
    text = table(results, budgets)
    elapsed = time.monotonic() - started
    print(text)
    print(
        f"target: {REACH:.0%} of {target:,.0f} output tok/s (emulated); best found by a "
        f"strategy {host.outcome(found).value:,.0f}; {options.seeds} seeds in {elapsed:.0f} s"
    )
    if options.out:
        block = _block(
            text, options, target, host.outcome(found).value, best, elapsed, tpe, host.workload
        )
        _write_between_markers(options.out, block)
    return 0


def _literal(text: str) -> Any:
    """``0.5`` -> 0.5, ``10`` -> 10, ``true`` -> True, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


MARKERS = ("<!-- search_efficiency.py: start -->", "<!-- search_efficiency.py: end -->")


def _write_between_markers(path: Path, block: str) -> None:
    """Replace what lies between the markers (or write a file holding only the block)."""
    text = path.read_text() if path.exists() else f"{MARKERS[0]}\n{MARKERS[1]}\n"
    head, _, rest = text.partition(MARKERS[0])
    _, _, tail = rest.partition(MARKERS[1])
    path.write_text(f"{head}{MARKERS[0]}\n{block}\n{MARKERS[1]}{tail}")


def _block(
    text: str,
    options: argparse.Namespace,
    target: float,
    found: float | None,
    best: Config,
    elapsed: float,
    tpe: dict[str, Any],
    workload: Any,
) -> str:
    last = options.first_seed + options.seeds - 1
    levels = "/".join(str(c) for c in workload.levels)
    changed = " ".join(
        [f"--tpe {k}={v}" for k, v in tpe.items()] + (["--no-gate"] if options.no_gate else [])
    )
    return f"""Measured with `python bench/search_efficiency.py --seeds {options.seeds}{" --first-seed " + str(options.first_seed) if options.first_seed else ""}{" " + changed if changed else ""} --out docs/search-efficiency.md`
({elapsed:.0f} s wall on the shared 2-core development machine). Seeds {options.first_seed}-{last};
budgets: default sampler {options.default_budget} host-run trials, random search
{options.random_budget}, the one-flag-at-a-time sweep until a pass over all parameters gains
nothing. `>N`: not reached within the budget (counted as N+1 in the median, so a ratio against
a censored random search is a lower bound). Workload: the emulated workload of
`search_spaces/glm5.yaml`: levels {levels}, {workload.input_len} input and
{workload.output_len} output tokens, {workload.requests_for(workload.levels[0])} requests at the first level.

{text}

Target: {REACH:.0%} of {target:,.0f} output tok/s (emulated): the best stable configuration found
by any strategy on any seed ({found:,.0f}), polished by coordinate ascent on the noise-free model:
`{best.describe()}`."""


if __name__ == "__main__":
    sys.exit(main())
