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
"""

from __future__ import annotations

import argparse
import itertools
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


def climb(landscape: Any, target: float, pairs: bool) -> int | None:
    """Host-run trials (the baseline is 1) until the omniscient climber reaches 95% of ``target``."""
    space = landscape.space
    config = space.config(dict(space.baseline), drop_inactive=True)
    value = landscape.outcome(config).value or 0.0
    trials = 1
    while value < bench.REACH * target and trials <= MAX_MOVES:
        moves = [((c,)) for c in _changes(space, config)]
        best = _best(landscape, config, moves)
        if (best is None or best[0] <= value) and pairs:
            best = _best(landscape, config, list(itertools.combinations(_changes(space, config), 2)))
        if best is None or best[0] <= value:
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


def _median(counts: list[int | None], budget: int) -> float:
    return statistics.median(budget + 1 if c is None else c for c in counts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=("generated", "emulator"), default="generated")
    parser.add_argument("--seeds", default="0-19", help="a range, e.g. 100-199")
    parser.add_argument("--strategy", default=None, help="also run this strategy on the seeds (e.g. guided)")
    parser.add_argument("--budget", type=int, default=60)
    options = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore")
    started = time.monotonic()
    rows = []
    for seed in bench._seed_range(options.seeds):
        landscape = bench._landscape(options.family, seed)
        _, target = bench._oracle(options.family, seed)
        single, paired = climb(landscape, target, pairs=False), climb(landscape, target, pairs=True)
        ran = None
        if options.strategy:
            run = bench.run_strategy(landscape, options.strategy, seed, options.budget, stop_at=bench.REACH * target)
            ran = bench.reach(run.configs, landscape, target)
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
    if options.strategy:
        ran = [r[3] for r in rows]
        median = _median(ran, options.budget)
        print(f"{options.strategy}: median {median:g}, within 40 on {sum(c is not None and c <= 40 for c in ran)} of "
              f"{len(rows)}; {median / _median(paired, budget):.2f}x the omniscient floor with pairs")
    print(f"{time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
