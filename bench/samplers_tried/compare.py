"""Run one sampler on the performance model for several seeds: trials to 95% of the target.

    python bench/samplers_tried/compare.py SAMPLER [--seeds 10] [--budget 40] [--no-gate]

SAMPLER: a Python expression with `optuna`, `seed` and `se` (bench/search_efficiency.py), e.g.
`se.make_sampler("tpe", seed)`, or `py:MODULE.FUNCTION` from this folder (`py:additive_ts.r3`).
The target is search_efficiency.py's polished best on the emulated workload (4,467 tok/s).
"""
from pathlib import Path
import sys, argparse, multiprocessing, statistics, time, warnings, io, importlib
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import optuna
from rich.console import Console
import search_efficiency as se
from tuner.space import load_space, Config
from tuner.study.trial import BaselinePruner, FeasibilityCheck
from tuner.study.loop import ProgressView, optimize_study

TARGETS = {"emulated": 4467.0}

def make(name, seed):
    if name.startswith("py:"):
        mod, fn = name[3:].split(".")
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        return getattr(importlib.import_module(mod), fn)(seed)
    return eval(name, {"optuna": optuna, "seed": seed, "se": se})

def host_for(workload):
    space = load_space(se.SPACE)
    host = se.ModelHost(space)
    if workload == "real":
        host.workload = space.workload_for(False)
    return space, host

def job(args):
    seeds, sampler, budget, gate, workload = args
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore")
    space, host = host_for(workload)
    out = []
    for seed in seeds:
        study = optuna.create_study(direction="maximize", sampler=make(sampler, seed),
                                    pruner=BaselinePruner(space.objective.prune_margin))
        check = FeasibilityCheck.from_study(study, space) if gate else None
        optimize_study(study, space, se.ModelRunner(host, seed), budget,
                       ProgressView(Console(file=io.StringIO())), feasibility=check)
        out.append([c.to_dict() for c in se.host_runs(study)])
    return out

def main():
    p = argparse.ArgumentParser()
    p.add_argument("sampler"); p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--budget", type=int, default=40); p.add_argument("--no-gate", action="store_true")
    p.add_argument("--workload", default="emulated"); p.add_argument("--target", type=float)
    p.add_argument("--also", default="", help="other fractions of the target to report, e.g. 0.8,0.9")
    o = p.parse_args()
    t0 = time.time()
    seeds = list(range(o.first, o.first + o.seeds))
    groups = [seeds[0::2], seeds[1::2]]
    with multiprocessing.get_context("fork").Pool(2) as pool:
        res = pool.map(job, [(g, o.sampler, o.budget, not o.no_gate, o.workload) for g in groups])
    by = {}
    for g, r in zip(groups, res):
        for s, runs in zip(g, r): by[s] = runs
    space, host = host_for(o.workload)
    target = o.target or TARGETS.get(o.workload)
    if target is None:
        found = max((Config(c) for runs in by.values() for c in runs), key=lambda c: host.outcome(c).value or 0)
        best, target = se.polish(space, host, found)
        print("polished target", target, best.describe())
    reach = [se.reach([Config(c) for c in by[s]], host, target) for s in seeds]
    med = statistics.median(o.budget + 1 if r is None else r for r in reach)
    bestfrac = [max((host.outcome(Config(c)).value or 0) for c in by[s]) / target for s in seeds]
    for fraction in [float(f) for f in o.also.split(",") if f]:
        hits = [next((i for i, c in enumerate(by[s], 1)
                      if (host.outcome(Config(c)).value or 0) >= fraction * target), None) for s in seeds]
        print(f"to {fraction:.0%}: median {statistics.median(o.budget + 1 if h is None else h for h in hits)} {hits}")
    print(f"{o.sampler} [{o.workload}] median={med} reach={reach} best%={[round(b*100) for b in bestfrac]} {time.time()-t0:.0f}s")

if __name__ == "__main__":
    main()
