"""How many host-run trials each search strategy needs to reach 95% of the best throughput.

The product's own loop (:func:`tuner.study.loop.optimize_study`) and trial runner
(:class:`tuner.study.trial.TrialRunner`: levels reported, the baseline pruner, failure
classes, the objective value) run against a *model host*: :class:`ModelRunner` replaces the
runner's start-up and its one level measurement (``TrialRunner._run_level``) with a landscape
(:mod:`landscapes`), so nothing of the outcome mapping is copied here. A landscape answers
what one trial on a host shows: levels, failure class, the server's observations, with noise.
Whether a trial reached the target is judged on the noise-free value of its configuration.

Families (``--family``):

- ``emulator``: the emulated GLM-5 host's performance model on ``glm5.yaml``;
- ``generated``: landscapes drawn per seed over ``glm5.yaml``'s parameters (seeds 0-49 to choose
  settings, 100-199 to report);
- ``vllm``: the vLLM-on-CPU grid measured once (``bench/landscapes/vllm_cpu_tiny.json``).

Strategies (``--strategies``): the product's registry (``guided``, ``tpe``, ``random``,
``one-at-a-time``) and ``tpe-as-today``: TPE with the settings ``make_sampler("tpe")`` always had,
blind to FAIL trials, plus the feasibility gate (the default before ``guided``).

Target: 95% (and 90%) of the best noise-free value known for the landscape: a coordinate-ascent
polish, on the noise-free landscape, of the baseline and of the best of 300 random
configurations (an oracle the strategies never see), raised to anything a strategy ran. A run
stops when it reaches 95% of that oracle, or at its budget.

Host hours: each host-run trial costs its start-up's phases and the levels that ran
(:mod:`variants`), a replayed row its measured seconds; a saved run that kept no seconds counts
``STARTUP_MIN`` minutes a start-up plus ``LEVEL_MIN`` a level.

    python bench/search_efficiency.py --family emulator --seeds 0-9
    python bench/search_efficiency.py --family generated --seeds 100-199 --out docs/search-efficiency.md
"""

from __future__ import annotations

import argparse
import io
import json
import math
import multiprocessing
import random
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import optuna
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))

from landscapes import (  # noqa: E402
    EmulatorLandscape,
    GeneratedLandscape,
    Landscape,
    Outcome,
    ReplayLandscape,
)

from variants import SIGNALS, ClientLimit, Signals, client_latencies, rerun_levels, level_seconds, sampled, startup_seconds, visible  # noqa: E402
from guided_variants import guided_strategy, read_options  # noqa: E402

from tuner.errors import ConfigError, ServerFailure  # noqa: E402
from tuner.loadgen import LevelMetrics  # noqa: E402
from tuner.space import Config, load_space  # noqa: E402
from tuner.study.record import CHOSEN_BY, CONFIG, LEVELS, outcome_of, read_levels  # noqa: E402
from tuner.study.record import PROBE_REFERENCE  # noqa: E402
from tuner.study.trial import FeasibilityCheck, TrialRunner  # noqa: E402
from tuner.study.loop import ProgressView, optimize_study, study_pruner  # noqa: E402
from tuner.study.strategies import Strategy, make_sampler, make_strategy  # noqa: E402
from tuner.study.strategies.tpe import tpe_settings  # noqa: E402
from tuner.timescale import TimeScale  # noqa: E402

__all__ = ["ModelHost", "ModelRunner", "host_runs", "main", "reach", "run_loop", "run_strategy", "polish"]

REPO = Path(__file__).resolve().parents[1]
SPACE = REPO / "search_spaces" / "glm5.yaml"
REACH = 0.95
ALSO = 0.90
WITHIN = 40
STARTUP_MIN = 3.5
LEVEL_MIN = 1.0
FAMILIES = ("emulator", "generated", "vllm")


# -- the model host ------------------------------------------------------------------------------


def ModelHost(space: Any | None = None) -> EmulatorLandscape:  # noqa: N802 (kept for older callers)
    """The emulated host's performance model (see :class:`landscapes.EmulatorLandscape`)."""
    return EmulatorLandscape(space)


@dataclass(frozen=True)
class _ModelHostName:
    name: str = "model-host"


@dataclass(frozen=True)
class _ModelTarget:
    """What the loop and the trial runner read from a target, for a host that is a model."""

    host: _ModelHostName = field(default_factory=_ModelHostName)
    emulated: bool = True
    command: str = "server"
    port: int = 30000
    local: bool = True
    time_scale: TimeScale = field(default_factory=TimeScale)
    profile: Any = None
    client_workers: int = 1  # one client process; a level it under-drove runs again with more

    def server_command(self, trial_number: int, run: int = 0) -> str:
        """The same command for every run: the landscape draws its own noise (``noise_run``)."""
        return self.command


class _ModelObserver:
    """The server log's numbers as :mod:`tuner.signals` reads them, written from what the
    landscape says each level's log shows (20 batch lines a level)."""

    def __init__(self, outcome: Outcome, signals: Signals = Signals.FULL) -> None:
        self.outcome = outcome
        self.signals = signals

    def watches(self, name: str) -> bool:
        if not visible(self.signals, name):
            return False
        return name != "eager_running_req" or "graph_max_bs" in self.outcome.observations

    def last(self, name: str) -> float | None:
        return self.outcome.observations.get(name) if visible(self.signals, name) else None

    def series(self, phase: str, name: str) -> list[float]:
        return sampled(self.signals, self._series(phase, name)) if visible(self.signals, name) else []

    def _series(self, phase: str, name: str) -> list[float]:
        if not phase.startswith("level-"):
            return []
        concurrency = int(phase.removeprefix("level-"))
        seen = self.outcome.per_level.get(concurrency) or self.outcome.observations
        if not seen or "running_req_max" not in seen:
            return []
        running, at_cap = seen["running_req_max"], seen.get("running_req_at_cap_fraction", 0.0)
        lines = 20
        full = round(at_cap * lines) if at_cap else lines
        batches = [running] * full + [max(1.0, running * 0.8)] * (lines - full)
        if name == "running_req":
            return batches
        if name == "eager_running_req":  # the decode lines that say `cuda graph: False`
            graphs = seen.get("graph_max_bs", 0.0)
            return [b for b in batches if b > graphs]
        if name == "queue_req":
            waiting = max(0.0, concurrency - running)
            return [waiting * (i + 1) / lines for i in range(lines)] if seen.get("queue_growing") else [0.0] * lines
        if name == "token_usage" and "token_usage_max" in seen:
            return [seen["token_usage_max"]] * lines
        return []


class _ModelSession:
    """What the runner's level loop asks of a server session, for a model host."""

    phase = ""

    def __init__(self, failure: str | None, argv: list[str], observer: _ModelObserver) -> None:
        self.failure = failure
        self.argv = argv
        self.observer = observer

    def wait_for_failure(self, wait_s: float) -> ServerFailure | None:
        return ServerFailure(self.failure, "model host: failed under load") if self.failure else None

    def log_excerpt(self) -> str:
        return ""

    def stop_reason(self) -> str | None:
        return None


class ModelRunner(TrialRunner):
    """The product's trial runner on a landscape: start-up and level measurement come from the
    landscape (with its noise); the level loop, the pruner, failure classes and the objective
    value are :class:`TrialRunner`'s own."""

    def __init__(self, landscape: Landscape, seed: int, study: optuna.Study | None = None,
                 noise_run: int = 0, signals: Signals = Signals.FULL) -> None:
        super().__init__(
            space=landscape.space, target=_ModelTarget(profile=landscape.space.profile), patches=None,
            study=study, local_runs_dir=Path("."), emulate=True,
        )
        self.landscape, self.seed = landscape, seed
        # run 0 draws the noise of seed ``s`` as it always did; run ``n`` another stream
        self._noise = f"{seed}" if noise_run == 0 else f"{seed}/{noise_run}"
        self.host = landscape  # older callers read runner.host
        self.signals = signals
        self._levels: dict[int, float] = {}
        self._outcome = Outcome((), None)
        self._limit: ClientLimit | None = None  # the client-limited variant's client (drawn once)
        self._draws = 0

    def run(self, trial: optuna.Trial, config: Any, launch: Any) -> list[float]:
        outcome = self.landscape.measured(Config(config), random.Random(f"{self._noise}:{trial.number}"))
        if outcome.at_start:
            raise ServerFailure(outcome.failure, "model host: failed at start")
        self._levels = dict(outcome.levels)
        self._outcome = outcome
        session = _ModelSession(outcome.failure, list(launch.argv), _ModelObserver(outcome, self.signals))
        return self._measure(trial, session, self.space.workload_for(True))

    def _run_level(self, session: Any, spec: Any, workers: int | None = None) -> tuple[LevelMetrics, None]:
        n, out = spec.num_requests, spec.output_len
        if spec.concurrency in self._levels:
            tps = self._levels[spec.concurrency]
            batch = (self._outcome.per_level.get(spec.concurrency) or {}).get("running_req_max")
            latencies = self._outcome.client.get(spec.concurrency) or client_latencies(spec.concurrency, tps, batch, out)
            short, bound = self._client_shortfall(spec, tps, workers or 1), {}
            if workers:  # a re-run with more client processes (the runner counts it: client_runs)
                bound["client_health"] = {"workers": workers}
            if short:  # the client fell behind: fewer requests in flight, a lower figure, flagged
                tps *= 1.0 - short
                bound = {"measurement_bound": f"the client sent {short:.0%} of the slot time late (model host)",
                         "in_flight": spec.concurrency * (1.0 - short)}
            return LevelMetrics(
                concurrency=spec.concurrency, num_requests=n, completed=n, failed=0,
                duration_s=n * out / tps, input_tokens=n * spec.input_len, output_tokens=n * out,
                output_throughput=tps, total_throughput=tps * (spec.input_len + out) / out,
                request_throughput=tps / out, **latencies, **bound,
            ), None
        return LevelMetrics(
            concurrency=spec.concurrency, num_requests=n, completed=0, failed=n, duration_s=1.0,
            input_tokens=0, output_tokens=0, output_throughput=0.0, total_throughput=0.0,
            request_throughput=0.0, stop_reason="the server died (model host)",
        ), None


    def _client_shortfall(self, spec: Any, tps: float, workers: int) -> float:
        """The ``client-limited`` variant's shortfall at this level (0 in the others)."""
        if self.signals is not Signals.CLIENT_LIMITED:
            return 0.0
        if self._limit is None:
            self._limit = ClientLimit.drawn(self.seed, self.landscape.outcome(self.space.baseline).value or 1.0)
        self._draws += 1
        return self._limit.shortfall(tps, workers, random.Random(f"{self._noise}:client:{self._draws}"))


# -- strategies ---------------------------------------------------------------------------------


class TpeAsToday(Strategy):
    """The default before ``guided``: ``make_sampler("tpe")``'s TPE (FAIL trials invisible to it)
    with the feasibility gate."""

    name = "tpe-as-today"
    gate = True

    def __init__(self, space: Any, seed: int | None) -> None:
        self.seed = seed

    def sampler(self) -> optuna.samplers.BaseSampler:
        return optuna.samplers.TPESampler(**tpe_settings(self.seed))


def bench_strategy(name: str, space: Any, seed: int, options: dict[str, Any] | None = None) -> Strategy:
    if name == "tpe-as-today":
        return TpeAsToday(space, seed)
    if name == "guided" and options:
        return guided_strategy(space, seed, options)
    return make_strategy(name, space, seed)


@dataclass
class Run:
    """One strategy on one landscape: the configurations run on the host, in order."""

    configs: list[Config]
    reasons: list[str]
    host_minutes: list[float]
    host_seconds: list[float] = field(default_factory=list)  # the landscape's (variants.py)


def run_strategy(
    landscape: Landscape,
    name: str,
    seed: int,
    budget: int,
    stop_at: float | None = None,
    options: dict[str, Any] | None = None,
    noise_run: int = 0,
    signals: Signals = Signals.FULL,
) -> Run:
    """``budget`` host-run trials of strategy ``name`` through the product's loop (in memory),
    stopping early once a configuration's noise-free value reaches ``stop_at``; ``noise_run``
    picks the run noise's stream (0: the seed's own); ``signals``: what the host's server reports
    besides the client's levels (:mod:`variants`)."""
    space = landscape.space
    strategy = bench_strategy(name, space, seed, options)
    study = optuna.create_study(
        directions=["maximize"], sampler=strategy.sampler(), pruner=study_pruner(space)
    )
    # A model host has its probe reference (each outcome was measured with the probe), so a
    # baseline that failed under load does not stop the run.
    study.set_user_attr(PROBE_REFERENCE, [])
    gate = FeasibilityCheck.from_study(study, space) if getattr(strategy, "gate", False) else None
    runner = ModelRunner(landscape, seed, study, noise_run, signals)
    progress = ProgressView(Console(file=io.StringIO()))
    ran = 0
    while ran < budget:
        # the product's loop: it reads the study view, queues the strategy's proposal and runs it
        summary = optimize_study(study, space, runner, 1, progress, feasibility=gate, strategy=strategy)
        if summary.ran == 0:
            break
        ran += 1
        if stop_at is not None:
            last = host_runs(study)[-1]
            value = landscape.outcome(last).value
            if value is not None and value >= stop_at:
                break
    return _as_run(study, landscape)


def _ran_on_host(trial: optuna.trial.FrozenTrial) -> bool:
    return outcome_of(trial).ran and CONFIG in trial.user_attrs


def host_runs(study: optuna.Study) -> list[Config]:
    """The configurations a study ran on the host, in order (not skipped, not reused)."""
    return [Config(t.user_attrs[CONFIG]) for t in study.get_trials(deepcopy=False) if _ran_on_host(t)]


def _as_run(study: optuna.Study, landscape: Landscape | None = None) -> Run:
    trials = [t for t in study.get_trials(deepcopy=False) if _ran_on_host(t)]
    return Run(
        [Config(t.user_attrs[CONFIG]) for t in trials],
        [str(t.user_attrs.get(CHOSEN_BY) or "") for t in trials],
        [STARTUP_MIN + LEVEL_MIN * len(t.user_attrs.get(LEVELS) or []) for t in trials],
        [_host_seconds(t, landscape) for t in trials],
    )


def _host_seconds(trial: optuna.trial.FrozenTrial, landscape: Landscape | None) -> float:
    """What the trial cost the host: a replayed row's measured seconds, else the start-up's
    phases and each level that ran (:mod:`variants`)."""
    config = Config(trial.user_attrs[CONFIG])
    if landscape is not None and landscape.outcome(config).host_seconds is not None:
        return float(landscape.outcome(config).host_seconds)
    levels = read_levels(trial.user_attrs.get(LEVELS))
    out = [int(lv.output_tokens or 0) // max(1, int(lv.completed or 1)) for lv in levels]
    return startup_seconds(dict(config)) + sum(
        (1 + rerun_levels(lv.client_runs))
        * level_seconds(int(lv.num_requests), n, lv.output_throughput if lv.stop_reason is None else None)
        for lv, n in zip(levels, out))


def run_loop(space: Any, host: Landscape, sampler: str, seed: int, budget: int, gate: bool,
             tpe: dict[str, Any] | None = None) -> optuna.Study:
    """The loop with a plain Optuna sampler (``make_sampler``) and optionally the gate, for
    ``budget`` host-run trials (kept for the feasibility tests and samplers_tried/)."""
    study = optuna.create_study(direction="maximize", sampler=make_sampler(sampler, seed),
                                pruner=study_pruner(space))
    check = FeasibilityCheck.from_study(study, space) if gate else None
    progress = ProgressView(Console(file=io.StringIO()))
    optimize_study(study, space, ModelRunner(host, seed, study), budget, progress, feasibility=check)
    return study


# -- the oracle target -------------------------------------------------------------------------


def _grid(param: Any) -> list[Any]:
    """The values the oracle's coordinate ascent tries for one parameter."""
    if not (hasattr(param, "low") and hasattr(param, "high")):
        return list(param.options())
    if getattr(param, "log", False):
        values = [int(param.low * 2**k) for k in range(int(math.log2(param.high / param.low)) + 1)]
    else:
        count = round((param.high - param.low) / param.step)
        values = [
            param.grid.normalize(param.low + k * param.step) if hasattr(param, "grid")
            else param.low + k * param.step
            for k in range(count + 1)
        ]
    return values + ([None] if param.unset else [])


def _natural_default(param: Any) -> Any:
    if param.has_default:
        return param.default
    if getattr(param, "unset", False):
        return None
    return param.low if hasattr(param, "low") else param.options()[0]


def with_value(space: Any, config: Config, name: str, value: Any) -> Config | None:
    """``config`` with one parameter changed (parameters it activates at their natural
    default), or None when the space refuses it."""
    defaults = {n: _natural_default(p) for n, p in space.parameters.items()}
    try:
        return space.config({**defaults, **dict(config), name: value}, drop_inactive=True)
    except ConfigError:
        return None


def _skipped(space: Any, config: Config) -> bool:
    return any(v.action == "skip" for v in space.constraint_violations(config))


def polish(space: Any, host: Any, config: Config) -> tuple[Config, float]:
    """Coordinate ascent on the noise-free landscape from ``config``."""
    best, best_value = config, host.outcome(config).value or 0.0
    improved = True
    while improved:
        improved = False
        for name, param in space.parameters.items():
            if name not in best:
                continue
            for value in _grid(param):
                candidate = with_value(space, best, name, value)
                if candidate is None or _skipped(space, candidate):
                    continue
                try:
                    value_now = host.outcome(candidate).value
                except KeyError:  # a replay: not measured
                    continue
                if value_now is not None and value_now > best_value * 1.0001:
                    best, best_value, improved = candidate, value_now, True
    return best, best_value


def oracle(landscape: Landscape, seed: int) -> tuple[Config, float]:
    """The best noise-free configuration the bench knows (never shown to a strategy)."""
    space = landscape.space
    if isinstance(landscape, ReplayLandscape):
        key, outcome = max(landscape.table.items(), key=lambda kv: kv[1].value or 0.0)
        return Config(_config_from_key(key)), outcome.value or 0.0
    rng = random.Random(f"oracle:{seed}")
    starts = [space.baseline]
    sampled = []
    for _ in range(300):
        values = {name: rng.choice(_grid(p)) for name, p in space.parameters.items()}
        try:
            config = space.config(values, drop_inactive=True)
        except ConfigError:
            continue
        if not _skipped(space, config) and landscape.outcome(config).value:
            sampled.append(config)
    sampled.sort(key=lambda c: landscape.outcome(c).value or 0.0, reverse=True)
    starts += sampled[:3]
    return max((polish(space, landscape, s) for s in starts), key=lambda cv: cv[1])


def _config_from_key(key: str) -> dict[str, Any]:
    import json

    return json.loads(key)


def reach(ran: list[Config], host: Any, target: float, share: float = REACH) -> int | None:
    """The 1-based count of host-run trials until one reached ``share`` x target (None: never)."""
    for index, config in enumerate(ran, start=1):
        value = host.outcome(config).value
        if value is not None and value >= share * target:
            return index
    return None


# -- jobs -------------------------------------------------------------------------------------


@cache
def _landscape(family: str, seed: int) -> Landscape:
    if family == "emulator":
        return _emulator()
    if family == "generated":
        return GeneratedLandscape(seed, _glm5())
    return _replay()


@cache
def _glm5() -> Any:
    return load_space(SPACE)


@cache
def _emulator() -> EmulatorLandscape:
    return EmulatorLandscape(_glm5())


@cache
def _replay() -> ReplayLandscape:
    return ReplayLandscape()


@cache
def _oracle(family: str, seed: int) -> tuple[Config, float]:
    return oracle(_landscape(family, seed), seed if family == "generated" else 0)


def _job(job: tuple[str, int, str, int, dict[str, Any], int, str]) -> dict[str, Any]:
    family, seed, strategy, budget, options, noise_run, signals = job
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore")
    landscape = _landscape(family, seed)
    _, target = _oracle(family, seed)
    started = time.monotonic()
    run = run_strategy(landscape, strategy, seed, budget, stop_at=REACH * target,
                       options=options if strategy == "guided" else None, noise_run=noise_run,
                       signals=Signals(signals))
    values = [landscape.outcome(c).value for c in run.configs]
    return {
        "family": family, "seed": seed, "noise_run": noise_run, "strategy": strategy, "target": target,
        "signals": signals, "host_seconds": run.host_seconds,
        "to95": reach(run.configs, landscape, target, REACH),
        "to90": reach(run.configs, landscape, target, ALSO),
        "best": max((v for v in values if v is not None), default=0.0),
        "minutes": run.host_minutes, "reasons": run.reasons, "seconds": time.monotonic() - started,
    }


# -- the report --------------------------------------------------------------------------------


def _median(counts: list[int | None], budget: int) -> float:
    return statistics.median(budget + 1 if c is None else c for c in counts)


def _shown(median: float, budget: int) -> str:
    return f">{budget}" if median > budget else f"{median:g}"


def label(row: dict[str, Any], variants: list[str]) -> str:
    """A row's line in the table: its strategy, and its signal variant when several ran."""
    signals = row.get("signals", "full")
    return row["strategy"] if len(variants) <= 1 else f"{row['strategy']} ({signals})"


def _hours(row: dict[str, Any]) -> float | None:
    """Host hours until the trial that reached 95%: the landscape's seconds (start-up phases and
    levels) where the row has them, else ``STARTUP_MIN`` and ``LEVEL_MIN`` (a saved run that kept
    no seconds)."""
    if not row["to95"]:
        return None
    seconds = row.get("host_seconds")
    if seconds:
        return sum(seconds[: row["to95"]]) / 3600
    return sum(row["minutes"][: row["to95"]]) / 60


def summarise(rows: list[dict[str, Any]], strategies: list[str], budget: int,
              variants: list[str] | None = None) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    variants = variants or ["full"]
    names = [name if len(variants) <= 1 else f"{name} ({v})" for name in strategies for v in variants]
    for name in names:
        mine = sorted((r for r in rows if label(r, variants) == name and r.get("signals", "full") in variants),
                      key=lambda r: (r.get("noise_run", 0), r["seed"]))
        if not mine:
            continue
        to95 = [r["to95"] for r in mine]
        hours = [_hours(r) for r in mine]
        out[name] = {
            "to95": to95,
            "median95": _median(to95, budget),
            "median90": _median([r["to90"] for r in mine], budget),
            "within": sum(1 for c in to95 if c is not None and c <= WITHIN),
            "seeds": len(mine),
            "hours": statistics.median(h if h is not None else math.inf for h in hours) if hours else math.inf,
            "censored": any(c is None for c in to95),
            "signals": mine[0].get("signals", "full"),
            "strategy": mine[0]["strategy"],
        }
    return out


def table(summary: dict[str, dict[str, Any]], budget: int, reference: str = "tpe-as-today") -> str:
    """The Markdown table; with several signal variants, each row's trials and host hours
    against the same strategy's ``full`` variant too."""
    variants = len({s["signals"] for s in summary.values()}) > 1
    lines = [
        f"| strategy | median trials to 95% | to 90% | seeds at 95% within {WITHIN} | "
        f"median host-hours to 95% | trials vs {reference} |" + (" trials, host-hours vs full |" if variants else ""),
        "|---|---|---|---|---|---|" + ("---|" if variants else ""),
    ]
    ref = summary.get(reference)
    for name, s in summary.items():
        hours = "never" if math.isinf(s["hours"]) else f"{s['hours']:.1f}"
        if ref is None or name == reference:
            ratio = "1x" if name == reference else ""
        else:
            r = ref["median95"] / s["median95"]
            bound = ">= " if ref["censored"] and not s["censored"] else ""
            ratio = f"{bound}{r:.1f}x fewer" if r >= 1 else f"{1 / r:.1f}x more"
        line = (f"| {name} | {_shown(s['median95'], budget)} | {_shown(s['median90'], budget)} | "
                f"{s['within']} of {s['seeds']} | {hours} | {ratio} |")
        if variants:
            full = summary.get(f"{s['strategy']} (full)")
            line += " " + _against(s, full) + " |"
        lines.append(line)
    return "\n".join(lines)


def _against(row: dict[str, Any], full: dict[str, Any] | None) -> str:
    """A variant's median trials and host hours over its strategy's full-signal figures."""
    if full is None or row is full:
        return "1x, 1x" if row is full else ""
    hours = ("-" if math.isinf(row["hours"]) or math.isinf(full["hours"]) or not full["hours"]
             else f"{row['hours'] / full['hours']:.2f}x")
    return f"{row['median95'] / full['median95']:.2f}x, {hours}"


def _seed_range(text: str) -> list[int]:
    first, _, last = text.partition("-")
    return list(range(int(first), int(last or first) + 1))


def _setting(text: str) -> int | float | str:
    """A ``--guided NAME=VALUE`` value: a number when it reads as one, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=FAMILIES, default="emulator")
    parser.add_argument("--seeds", default="0-9", help="a range, e.g. 100-199")
    parser.add_argument("--strategies", default="guided,tpe-as-today")
    parser.add_argument("--budget", type=int, default=80, help="host-run trials per run at most")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--guided", action="append", default=[], metavar="NAME=VALUE",
                        help="a guided setting or variant (explore_every=4, sweep.points=3, "
                             "cliff=said-full: bench/guided_variants.py)")
    parser.add_argument("--signals", default="full",
                        help=f"signal variants, comma-separated ({', '.join(SIGNALS)}): what the host's server "
                             "reports besides the client's levels (bench/variants.py)")
    parser.add_argument("--noise-runs", type=int, default=1,
                        help="runs per seed, each with its own stream of run noise (same landscape): "
                             "a steadier comparison of settings; 1 for the reported figures")
    parser.add_argument("--per-seed", action="store_true", help="print trials to 95%% per seed")
    parser.add_argument("--save", type=Path, default=None, help="also write the runs (JSON) here")
    parser.add_argument("--merge", type=Path, action="append", default=[],
                        help="add the runs saved by an earlier --save (same family and seeds)")
    parser.add_argument("--out", type=Path, default=None,
                        help="write the table into this Markdown file between the family's markers")
    options = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore")
    seeds = _seed_range(options.seeds) if options.family != "vllm" or "-" in options.seeds else _seed_range(options.seeds)
    strategies = [s.strip() for s in options.strategies.split(",") if s.strip()]
    guided = {k: _setting(v) for k, _, v in (o.partition("=") for o in options.guided)}
    try:
        read_options(guided)
    except ValueError as error:
        parser.error(f"--guided: {error}")
    variants = [v.strip() for v in options.signals.split(",") if v.strip()]
    unknown = [v for v in variants if v not in SIGNALS]
    if unknown:
        parser.error(f"--signals: {', '.join(unknown)} unknown; use {', '.join(SIGNALS)}")
    jobs = [(options.family, seed, name, options.budget, guided, run, variant)
            for run in range(options.noise_runs) for seed in seeds for name in strategies for variant in variants]
    started = time.monotonic()
    if options.processes > 1:
        with multiprocessing.get_context("fork").Pool(options.processes) as pool:
            rows = list(pool.imap_unordered(_job, jobs))
    else:
        rows = [_job(job) for job in jobs]
    elapsed = time.monotonic() - started
    if options.save:
        options.save.write_text(json.dumps(rows))
    for path in options.merge:
        earlier = [r for r in json.loads(path.read_text()) if r["seed"] in seeds and r["family"] == options.family
                   and r.get("noise_run", 0) < options.noise_runs and r.get("signals", "full") in variants]
        rows += earlier
        strategies += [s for s in dict.fromkeys(r["strategy"] for r in earlier) if s not in strategies]
    summary = summarise(rows, strategies, options.budget, variants)
    text = table(summary, options.budget)
    print(text)
    if options.per_seed:
        for name, s in summary.items():
            cells = ", ".join("-" if c is None else str(c) for c in s["to95"])
            print(f"{name}: {cells}")
    targets = sorted({round(r["target"]) for r in rows})
    print(f"family {options.family}, seeds {options.seeds}, budget {options.budget}; "
          f"targets {targets[0]:,}-{targets[-1]:,} tok/s; {elapsed:.0f} s")
    if options.out:
        block = _block(text, options, summary, elapsed, targets)
        _write_between_markers(options.out, options.family + ("" if variants == ["full"] else " signals"), block)
    return 0


def _block(text: str, options: argparse.Namespace, summary: dict[str, Any], elapsed: float,
           targets: list[int]) -> str:
    extra = "".join(f" --guided {g}" for g in options.guided)
    extra += f" --noise-runs {options.noise_runs}" if options.noise_runs > 1 else ""
    extra += f" --signals {options.signals}" if options.signals != "full" else ""
    extra += "".join(f" --merge {m}" for m in options.merge)
    extra += f" --save {options.save}" if options.save else ""
    per_seed = "\n".join(
        f"- {name}: " + ", ".join(f">{options.budget}" if c is None else str(c) for c in s["to95"])
        for name, s in summary.items()
    ) if len(next(iter(summary.values()))["to95"]) <= 20 else ""
    return (
        f"`python bench/search_efficiency.py --family {options.family} --seeds {options.seeds} "
        f"--strategies {options.strategies} --budget {options.budget}{extra}` "
        f"({elapsed:.0f} s wall on the shared 2-core machine; target 95% of "
        f"{targets[0]:,}" + (f"-{targets[-1]:,}" if len(targets) > 1 else "") + " output tok/s)\n\n"
        + text + ("\n\nTrials to 95% per seed:\n\n" + per_seed if per_seed else "")
    )


def _write_between_markers(path: Path, family: str, block: str) -> None:
    start, end = f"<!-- search_efficiency.py {family}: start -->", f"<!-- search_efficiency.py {family}: end -->"
    text = path.read_text() if path.exists() else ""
    if start not in text:
        text += f"\n{start}\n{end}\n"
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    path.write_text(f"{head}{start}\n{block}\n{end}{tail}")


if __name__ == "__main__":
    sys.exit(main())
