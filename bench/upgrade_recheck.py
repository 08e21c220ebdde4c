"""After an engine upgrade: host runs until a study reaches the old winner's figure, seeded from
the old study (`tuner recheck`, then `tuner optimize --from-study`) against cold.

Per seed: a study of ``--old-budget`` trials on a generated landscape (the old version); the
new version is the same landscape with every effect shifted by a drawn amount (each factor
times ``uniform(1 - shift, 1 + shift)``, :class:`ShiftedLandscape`). The target is the old
winner's noise-free figure on the old version (what the deployed launch gave before the
upgrade), or the new version's best (the bench's oracle) when that is lower. The seeded run
pays the recheck's runs (``--top``+1 configurations x ``--runs``), then runs the product's loop on a study seeded by
:func:`tuner.recheck.seed_from_study`; the cold run is the loop on a fresh study. Both count
host runs until a configuration reaches :data:`search_efficiency.REACH` of the target.

    python3 bench/upgrade_recheck.py --seeds 1-16 --old-budget 15 --budget 30
    python3 bench/upgrade_recheck.py --seeds 1-16 --old-budget 15 --budget 30 --top 1 --runs 1

gave (2026-12-06, 16 seeds, effects shifted by up to 15%, guided strategy, 95% of the target):

- the recheck's defaults (``--top 2 --runs 2``: 6 runs): median 6 host runs seeded (recheck
  included) against 9.5 cold, cold/seeded 1.58x; seeded fewer on 7 seeds, more on 8;
- ``--top 1 --runs 1`` (2 runs): median 2 against 9.5, 4.75x; fewer on 12 seeds, more on 1.

On 10 of the 16 seeds the old winner still reaches the target after the shift, so the recheck
alone finds it; on the 5 where it does not and a search reaches it (seeds 1, 2, 9, 14, 15), the
seeded search took 22, 17, 17, 18, 11 runs (``--top 1 --runs 1``) against cold's 18, 17, 23, 19,
16: beyond the recheck itself, the seed saves little; on seed 8 neither reached it in 30.
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import optuna
from landscapes import GeneratedLandscape
from rich.console import Console
from search_efficiency import REACH, ModelRunner, bench_strategy, host_runs, oracle

from tuner.recheck import RecheckRuns, choose_subjects, recheck_study_name, seed_from_study
from tuner.space import Config
from tuner.study.loop import ProgressView, optimize_study, study_pruner
from tuner.study.record import PROBE_REFERENCE, read_view
from tuner.study.storage import open_storage, remember_storage

FACTORS = ("moe", "attention", "chunked", "kv_dtype_speed")
SCALARS = ("moe_patch_gain", "eager", "sched_gain", "radix_off", "forced_fusion")


class ShiftedLandscape(GeneratedLandscape):
    """The landscape of ``seed`` with each effect shifted by a drawn amount (the new version)."""

    def __init__(self, seed: int, shift: float) -> None:
        super().__init__(seed)
        rng = random.Random(f"upgrade:{seed}")
        for name in FACTORS:
            setattr(self, name, {k: v * rng.uniform(1 - shift, 1 + shift) for k, v in getattr(self, name).items()})
        for name in SCALARS:
            setattr(self, name, getattr(self, name) * rng.uniform(1 - shift, 1 + shift))
        self._cache = {}


class CountingRunner(ModelRunner):
    """A model runner whose every run draws its own noise (a re-run is a fresh start), from a
    stream of the study's own: the cold study draws the same noise whatever ran before it."""

    def __init__(self, landscape: GeneratedLandscape, seed: int, study: optuna.Study) -> None:
        super().__init__(landscape, seed, study)
        self.calls = 0

    def run(self, trial: optuna.Trial, config: Config, launch: object) -> list[float]:
        self._noise = f"{self.seed}/{self.study.study_name}/{self.calls}"
        self.calls += 1
        return super().run(trial, config, launch)


def _loop(study: optuna.Study, landscape: GeneratedLandscape, seed: int, budget: int, stop_at: float | None) -> int | None:
    """The product's loop, one trial at a time: host runs until one reaches ``stop_at``."""
    space = landscape.space
    strategy = bench_strategy("guided", space, seed)
    runner = CountingRunner(landscape, seed, study)
    progress = ProgressView(Console(file=io.StringIO()))
    before = len(host_runs(study))
    for _ in range(budget):
        if optimize_study(study, space, runner, 1, progress, strategy=strategy).ran == 0:
            break
        last = host_runs(study)[-1]
        value = landscape.outcome(last).value
        if stop_at is not None and value is not None and value >= stop_at:
            return len(host_runs(study)) - before
    return None


def one_seed(seed: int, shift: float, old_budget: int, budget: int, top: int, runs: int, folder: Path) -> dict:
    old_land, new_land = GeneratedLandscape(seed), ShiftedLandscape(seed, shift)
    space = old_land.space
    url = str(folder / f"s{seed}.db")
    storage = open_storage(url)

    def create(name: str) -> optuna.Study:
        study = optuna.create_study(storage=storage, study_name=name, directions=["maximize"],
                                    pruner=study_pruner(space, True))
        study.set_user_attr(PROBE_REFERENCE, [])
        # seed_from_study reads the recheck study from the storage the seeded study lives in
        return remember_storage(study, storage)

    old = create("old")
    _loop(old, old_land, seed, old_budget, None)
    view = read_view(old, space)
    winner = view.best_stable
    # the figure the deployed launch had before the upgrade; the new version's best when lower
    target = min(old_land.outcome(Config(winner.config)).value or 0.0, oracle(new_land, seed)[1])
    goal = REACH * target
    # recheck on the new version: the product's runs, stored as tuner recheck stores them
    recheck = optuna.create_study(storage=storage, study_name=recheck_study_name("old", "new"),
                                  directions=["maximize"], pruner=optuna.pruners.NopPruner())
    subjects = choose_subjects(view, top)
    made = RecheckRuns(recheck, "old", space, CountingRunner(new_land, seed, recheck)).run(subjects, runs, set())
    seeded = create("seeded")
    seed_from_study(seeded, space, url, "old", "new")
    copied = [Config(r.config) for r in read_view(seeded, space).records if r.value is not None]
    reached_in_copy = any((new_land.outcome(c).value or 0.0) >= goal for c in copied)
    more = 0 if reached_in_copy else _loop(seeded, new_land, seed, budget, goal)
    cold = _loop(create("cold"), new_land, seed, budget, goal)
    return {"seed": seed, "recheck_runs": made, "seeded": None if more is None else made + more, "cold": cold}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0-5")
    parser.add_argument("--shift", type=float, default=0.15)
    parser.add_argument("--old-budget", type=int, default=20)
    parser.add_argument("--budget", type=int, default=40)
    parser.add_argument("--top", type=int, default=2)
    parser.add_argument("--runs", type=int, default=2)
    options = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        first, _, last = options.seeds.partition("-")
        for seed in range(int(first), int(last or first) + 1):
            row = one_seed(seed, options.shift, options.old_budget, options.budget, options.top, options.runs, Path(folder))
            print(f"seed {seed}: seeded {row['seeded']} host runs ({row['recheck_runs']} of them the recheck), "
                  f"cold {row['cold']}", flush=True)
            rows.append(row)
    fill = options.budget + 1  # a run that never reached the target counts as the budget + 1
    seeded = statistics.median(r["seeded"] if r["seeded"] is not None else fill for r in rows)
    cold = statistics.median(r["cold"] if r["cold"] is not None else fill for r in rows)
    won = sum(1 for r in rows if (r["seeded"] or fill) < (r["cold"] or fill))
    lost = sum(1 for r in rows if (r["seeded"] or fill) > (r["cold"] or fill))
    print(f"seeded fewer runs than cold on {won} seed(s), more on {lost}")
    print(f"median host runs to {REACH:.0%} of the old winner's figure then (capped at the new best): seeded {seeded:g} "
          f"(recheck included), cold {cold:g}; cold/seeded = {cold / seeded:.2f}x "
          f"({len(rows)} seeds, effects shifted by up to {options.shift:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
