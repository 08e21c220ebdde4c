"""How few host-run trials could any search need? ``python bench/search_floor.py --seeds 0-19``

The search benchmark (``search_efficiency.py``) counts the host-run trials a strategy needs to
reach 95% of the best configuration the bench knows. This script gives that count a floor: a
climber that *knows the noise-free landscape* (no strategy does) and still changes the
configuration one move a trial, from the baseline:

- ``single``: each trial makes the one change of one parameter that gains most (the grid of the
  bench's oracle); it stops where no single change gains;
- ``pairs``: the same, and where no single change gains, the pair of changes that gains most
  (interactions, a memory fraction that pays only with a larger cap, ...).

Each move is one host-run trial, the baseline is trial 1 (as in the benchmark). With
``--strategy guided`` the script also runs that strategy on the same seeds (full signals, budget
60, the benchmark's own runner) and prints its median and the ratio to the floor, measured in the
same run. Tuning seeds (0-49) and held-out seeds (100-199) are the benchmark's.

Where the strategy's trials go and what noise costs it (issue 28.3):

- ``--signals none`` runs the strategy under the log-less server (``bench/variants.py``);
- ``--noise-scale 0`` runs it on the landscape without run noise (the strategy's order and
  rules alone: what is left of its count is the cost of measuring one change a trial);
- ``--by-reason`` counts, up to the trial that reached 95% (or the budget), the trials of each
  kind of reason (a rule, the memory cliff, the sweep of each parameter, the model, ...) and the
  gain each made (log of a new highest noise-free value over the one before), and prints the
  median the strategy would need if the kinds that never gained (less than 0.1% a trial) cost no trial: a bound on what
  dropping them could buy, not a strategy;
- ``--confirm Z`` measures a new best again when it wins by less than Z times the run noise
  (the mean of both runs is what the strategy sees; each second run counts as a host run);
- ``--visible K`` also runs the climber (with pairs) on moves that gain at least K times the
  landscape's run noise only: where it cannot reach 95%, any search must take at least one
  change whose gain one run cannot tell from the noise;
- ``--below-best`` counts the trials that changed a base (the earlier configuration closest to
  them) whose noise-free value was 2% or more below the best one run before them: with run
  noise, a lucky measurement becomes the best that later changes build on.
"""

from __future__ import annotations

import argparse
import collections
import copy
import dataclasses
import itertools
import math
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import optuna  # noqa: E402

import search_efficiency as bench  # noqa: E402
from tuner.study.strategies.guided._common import distance  # noqa: E402
from variants import Signals  # noqa: E402

MAX_MOVES = 40


def _changes(space: Any, config: Any) -> list[tuple[str, Any]]:
    return [(name, value) for name, param in space.parameters.items() for value in bench._grid(param)
            if config.get(name, "<inactive>") != value]


def _apply(space: Any, config: Any, changes: tuple[tuple[str, Any], ...]) -> Any | None:
    for name, value in changes:
        config = bench.with_value(space, config, name, value)
        if config is None:
            return None
    return None if bench._skipped(space, config) else config


def climb(landscape: Any, target: float, pairs: bool, visible: float = 0.0) -> int | None:
    """Host-run trials (the baseline is 1) until the omniscient climber reaches 95% of ``target``;
    ``visible`` = K: it takes only moves that gain at least K times the landscape's run noise
    (a gain one run can tell from the noise)."""
    space = landscape.space
    config = space.config(dict(space.baseline), drop_inactive=True)
    value = landscape.outcome(config).value or 0.0
    trials = 1
    step = 1.0 + visible * landscape.noise
    while value < bench.REACH * target and trials <= MAX_MOVES:
        moves = [((c,)) for c in _changes(space, config)]
        best = _best(landscape, config, moves)
        if (best is None or best[0] <= value * step) and pairs:
            best = _best(landscape, config, list(itertools.combinations(_changes(space, config), 2)))
        if best is None or best[0] <= value * step:
            return None
        value, config = best
        trials += 1
    return trials if value >= bench.REACH * target else None


def _best(landscape: Any, config: Any, moves: list[tuple[tuple[str, Any], ...]]) -> tuple[float, Any] | None:
    best = None
    for move in moves:
        if len({name for name, _ in move}) < len(move):
            continue
        candidate = _apply(landscape.space, config, move)
        if candidate is None:
            continue
        value = landscape.outcome(candidate).value
        if value is not None and (best is None or value > best[0]):
            best = (value, candidate)
    return best


def with_noise(landscape: Any, scale: float) -> Any:
    """A copy of ``landscape`` whose run noise is ``scale`` times its own (the bench caches one
    landscape per seed, and the emulator's for every seed: it is not changed)."""
    scaled = copy.copy(landscape)
    scaled.noise = landscape.noise * scale
    return scaled


class Confirming:
    """``landscape`` as a host that measures a new best again when it wins by less than ``z``
    times the run noise over the best measured before, and reads it as the mean of both runs
    (the strategy sees one trial; each second run is a host run all the same: ``extra`` holds the
    number of host runs each came after). A bench of the idea, not the product's loop."""

    def __init__(self, landscape: Any, z: float) -> None:
        self.landscape, self.z = landscape, z
        self.best: float | None = None
        self.runs = 0
        self.extra: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.landscape, name)

    def measured(self, config: Any, rng: Any) -> Any:
        out = self.landscape.measured(config, rng)
        self.runs += 1
        value = out.value
        close = self.best is not None and value is not None and self.best < value < self.best * (1 + self.z * self.noise)
        if close and self.z > 0:
            again = self.landscape.measured(config, rng)
            if again.value is not None:
                out = dataclasses.replace(out, levels=tuple(
                    (c, (a + b) / 2) for (c, a), (_, b) in zip(out.levels, again.levels)))
                self.extra.append(self.runs)
        if out.value is not None and (self.best is None or out.value > self.best):
            self.best = out.value
        return out

    def counted(self, reached: int | None) -> int | None:
        """Host runs up to trial ``reached``, the second runs included."""
        return None if reached is None else reached + sum(1 for at in self.extra if at <= reached)


def reason_kind(reason: str) -> str:
    """The kind of a trial's reason: ``sweep: <parameter>`` for the sweep, else its first word
    (``rule``, ``cliff``, ``repair``, ``model``, ``combine``, ``baseline``, ...)."""
    kind, _, rest = reason.partition(":")
    if kind == "sweep":
        return "sweep: " + rest.split("=")[0].strip()
    return kind.strip() or "?"


def by_reason(run: Any, landscape: Any, target: float) -> tuple[list[tuple[str, float]], int | None]:
    """Each trial's reason kind and gain (log of a new highest noise-free value over the one
    before; 0 otherwise), up to the trial that reached 95% of ``target``, and that trial (None: never)."""
    rows, best = [], 0.0
    for index, (config, reason) in enumerate(zip(run.configs, run.reasons), start=1):
        value = landscape.outcome(config).value or 0.0
        rows.append((reason_kind(reason), math.log(value / best) if best and value > best else 0.0))
        best = max(best, value)
        if value >= bench.REACH * target:
            return rows, index
    return rows, None


def below_best(run: Any, landscape: Any, stop: int | None, share: float = 0.98) -> tuple[int, int]:
    """How many of the run's trials (after the baseline, up to ``stop``) changed a configuration
    whose noise-free value was below ``share`` of the best noise-free value run before them, and
    how many trials that is out of: the noise cost of building on a lucky measurement. A trial's
    base is the earlier configuration closest to it (fewest parameters set otherwise; the latest
    of those): the best it was proposed from, for one change and the model's few; a trial whose
    base failed (a repair) is not counted."""
    values = [landscape.outcome(c).value or 0.0 for c in run.configs]
    configs = [dict(c) for c in run.configs]
    end = stop or len(configs)
    below = counted = 0
    for index in range(1, end):
        base = -min((distance(configs[index], configs[j]), -j) for j in range(index))[1]
        if not values[base]:
            continue  # a repair of a failure, not a best
        counted += 1
        below += values[base] < share * max(values[:index])
    return below, counted


def _median(counts: list[int | None], budget: int) -> float:
    return statistics.median(budget + 1 if c is None else c for c in counts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=("generated", "emulator"), default="generated")
    parser.add_argument("--seeds", default="0-19", help="a range, e.g. 100-199")
    parser.add_argument("--strategy", default=None, help="also run this strategy on the seeds (e.g. guided)")
    parser.add_argument("--budget", type=int, default=60)
    parser.add_argument("--signals", default="full", choices=[s.value for s in Signals],
                        help="what the strategy's server reports besides the client's levels")
    parser.add_argument("--noise-scale", type=float, default=1.0,
                        help="the landscape's run noise times this for the strategy (0: none)")
    parser.add_argument("--by-reason", action="store_true",
                        help="the strategy's trials and gains by kind of reason, up to 95%%")
    parser.add_argument("--confirm", type=float, default=0.0, metavar="Z",
                        help="measure a new best again when it wins by less than Z times the noise (0: never)")
    parser.add_argument("--visible", type=float, default=None, metavar="K",
                        help="also climb with moves that gain at least K times the run noise only")
    parser.add_argument("--below-best", action="store_true",
                        help="how many of the strategy's trials changed a base 2%% below the best run before them")
    options = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore")
    started = time.monotonic()
    rows = []
    kinds: list[list[tuple[str, float]]] = []
    below: list[tuple[int, int]] = []
    visible: list[int | None] = []
    for seed in bench._seed_range(options.seeds):
        landscape = bench._landscape(options.family, seed)
        _, target = bench._oracle(options.family, seed)
        single, paired = climb(landscape, target, pairs=False), climb(landscape, target, pairs=True)
        seen = None if options.visible is None else climb(landscape, target, pairs=True, visible=options.visible)
        visible.append(seen)
        ran = None
        if options.strategy:
            host = Confirming(with_noise(landscape, options.noise_scale), options.confirm)
            run = bench.run_strategy(host, options.strategy, seed,
                                     options.budget, stop_at=bench.REACH * target, signals=Signals(options.signals))
            reasons, reached = by_reason(run, landscape, target)
            kinds.append(reasons)
            below.append(below_best(run, landscape, reached))
            ran = host.counted(reached)
        rows.append((seed, single, paired, ran))
        print(f"seed {seed}: single {single or 'never'}, pairs {paired or 'never'}"
              + (f", {options.strategy} {ran or f'>{options.budget}'}" if options.strategy else ""), flush=True)
    budget = MAX_MOVES
    single = [r[1] for r in rows]
    paired = [r[2] for r in rows]
    print(f"{options.family} seeds {options.seeds}: omniscient climber, trials to 95% (baseline = 1): "
          f"single changes median {_median(single, budget):g}, reached on {sum(c is not None for c in single)} of "
          f"{len(rows)}; with pairs where stuck median {_median(paired, budget):g}, reached on "
          f"{sum(c is not None for c in paired)} of {len(rows)}")
    if options.visible is not None:
        print(f"with pairs, every move gaining at least {options.visible:g} x the run noise: median "
              f"{_median(visible, budget):g}, reached on {sum(c is not None for c in visible)} of {len(rows)}, "
              f"within 40 on {sum(c is not None and c <= 40 for c in visible)}")
    if options.strategy:
        ran = [r[3] for r in rows]
        median = _median(ran, options.budget)
        print(f"{options.strategy} (signals {options.signals}, noise x{options.noise_scale:g}"
              f"{f', confirm {options.confirm:g}' if options.confirm else ''}): median {median:g}, "
              f"within 40 on {sum(c is not None and c <= 40 for c in ran)} of "
              f"{len(rows)}; {median / _median(paired, budget):.2f}x the omniscient floor with pairs")
        if options.by_reason:
            _print_by_reason(kinds, ran, options.budget)
        if options.below_best:
            worse, counted = sum(b for b, _ in below), sum(c for _, c in below)
            print(f"trials that changed a base 2% below the best run before them (up to 95%): "
                  f"{worse} of {counted} ({worse / max(1, counted):.0%})")
    print(f"{time.monotonic() - started:.0f} s")
    return 0


def _print_by_reason(kinds: list[list[tuple[str, float]]], ran: list[int | None], budget: int) -> None:
    trials: collections.Counter[str] = collections.Counter()
    gains: collections.Counter[str] = collections.Counter()
    for rows in kinds:
        for kind, gain in rows[:40]:
            trials[kind] += 1
            gains[kind] += gain
    print("| kind of reason | trials up to 95% (or 40) | gain (sum of log) | gain a trial |")
    print("|---|---|---|---|")
    for kind in sorted(trials, key=lambda k: -gains[k] / trials[k]):
        print(f"| {kind} | {trials[kind]} | {gains[kind]:.2f} | {gains[kind] / trials[kind]:.3f} |")
    idle = {kind for kind in trials if gains[kind] / trials[kind] < 0.001 and kind != "baseline"}
    free = [None if reached is None else sum(kind not in idle for kind, _ in rows)
            for rows, reached in zip(kinds, ran)]
    print(f"if {', '.join(sorted(idle))} cost no trial: median {_median(free, budget):g}, within 40 on "
          f"{sum(c is not None and c <= 40 for c in free)} of {len(free)} (a bound, not a strategy)")


if __name__ == "__main__":
    raise SystemExit(main())
