"""Issue 39's target: a 30-run study on a held-out server, with the client near its limit.

The server is ``bench/heldout_server.py`` (real HTTP, SGLang's API, a batch scheduler whose speed
is a noise-free function of five launch flags, 2% noise a start, no decode lines in its log), run
with ``host: local`` beside the tuner on this machine, levels 16/64/256/512 with
``output_len: 16``: the client has to take in up to about 6,000 output tok/s of one-token events
while the server shares its cores. For each seed this script runs ``tuner optimize SPACE --trials
30 --seed S`` in a scratch folder (its own storage), reads the exported winner (``tuner best
--json``), and judges it by the server's own noise-free figure (``model_throughput``, best over
the levels) against the best configuration of the space (every one of its 1,440 enumerated).

Target (issue 39): every seed's exported/best at least 0.95 and its re-measured spread at most 5%.
A winner measured once has no re-measured spread (the 2% the study assumes is not one): the
summary counts such a seed as not showing the spread target.

Run: ``python bench/client_bound_study.py [--seeds 0 1 2] [--trials 30] [--out FILE]``
(about 10 minutes a seed here); ``--reprint FILE`` prints a saved run again.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import optuna  # noqa: E402
from heldout_server import SPACE, Config, model_throughput  # noqa: E402

sys.path.insert(0, str(BENCH.parent))
from tuner.study.record import BOUND_LEVELS, trial_figure  # noqa: E402

LEVELS = (16, 64, 256, 512)
LEVELS_KEY = "levels"  # the trial attribute of its measured levels (tuner.study.record.LEVELS)
OUTPUT_LEN = 16
TARGET_RATIO = 0.95
TARGET_SPREAD = 0.05

FLAGS = {name: "--" + name.replace("_", "-") for name in SPACE}

# What the held-out server's `--help` answers to, and its package for the engine-version check
# (the sglang profile imports `sglang` with host.python): a package of its own, not SGLang.
PACKAGE = '__version__ = "0.0.heldout"  # bench/heldout_server.py: not SGLang\n'


def space_yaml(folder: Path, port: int) -> str:
    """The search space: engine sglang on this machine, the held-out server as its command."""
    parameters = "".join(
        f"  {name}:\n    kind: categorical\n    flag: {FLAGS[name]}\n    choices: {json.dumps(values)}\n"
        for name, values in SPACE.items()
    )
    baseline = Config()
    return f"""name: heldout-client-bound
engine: sglang
model: heldout (bench/heldout_server.py, a batch model; not SGLang)
host: local
server:
  command: {sys.executable} {BENCH / 'heldout_server.py'}
  port: {port}
  flags:
    --model-path: heldout-model
  env:
    PYTHONPATH: {folder / 'package'}
timeouts: {{start_s: 30, ready_s: 60, level_s: 120, stop_grace_s: 5, probe_s: 30}}
parameters:
{parameters}baseline:
{''.join(f'  {name}: {json.dumps(getattr(baseline, name))}{chr(10)}' for name in SPACE)}workload:
  levels: {list(LEVELS)}
  input_len: 16
  output_len: {OUTPUT_LEN}
  requests_per_level: {{per_concurrency: 2, min: 128}}
  warmup: 8
objective:
  metric: output_throughput
"""


def figure(config: dict) -> float:
    """The server's own noise-free figure for a configuration: the best over the study's levels."""
    model = Config(**{name: config[name] for name in SPACE})
    return max(model_throughput(model, c, OUTPUT_LEN) for c in LEVELS)


def best_in_space() -> tuple[float, dict]:
    """The best configuration of the space by the server's own figure (all of it enumerated)."""
    configs = (dict(zip(SPACE, values)) for values in itertools.product(*SPACE.values()))
    return max(((figure(c), c) for c in configs), key=lambda pair: pair[0])


def run_seed(seed: int, trials: int, port: int) -> dict:
    """One study in a scratch folder: the exported winner and how it compares."""
    env = {**os.environ, "PYTHONPATH": str(BENCH.parent)}
    with tempfile.TemporaryDirectory(prefix=f"client-bound-{seed}-") as scratch:
        folder = Path(scratch)
        (folder / "package" / "sglang").mkdir(parents=True)
        (folder / "package" / "sglang" / "__init__.py").write_text(PACKAGE)
        space = folder / "space.yaml"
        space.write_text(space_yaml(folder, port))
        storage = f"sqlite:///{folder / 'study.db'}"
        started = time.monotonic()
        optimize = subprocess.run(
            [sys.executable, "-m", "tuner", "optimize", str(space), "--trials", str(trials),
             "--seed", str(seed), "--storage", storage],
            cwd=folder, env=env, capture_output=True, text=True)
        wall_s = time.monotonic() - started
        if optimize.returncode != 0:
            return {"seed": seed, "error": optimize.stderr[-2000:] or optimize.stdout[-2000:], "wall_s": wall_s}
        best = subprocess.run(
            [sys.executable, "-m", "tuner", "best", str(space), "--storage", storage, "--json"],
            cwd=folder, env=env, capture_output=True, text=True, check=True)
        winner = json.loads(best.stdout)
        study = optuna.load_study(study_name=winner["study"], storage=storage)
        finished = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
        study_bound = sum(len(t.user_attrs.get(BOUND_LEVELS) or []) for t in study.trials)
        study_levels = sum(len(t.user_attrs.get(LEVELS_KEY) or []) for t in study.trials)
        flagged = sum(1 for t in study.trials for level in t.user_attrs.get(LEVELS_KEY) or []
                      if level.get("measurement_bound"))
        # the configurations the study measured, by the server's own figure: did it find the best?
        measured_best = max((figure(t.params) for t in finished), default=0.0)
    exported = figure(winner["config"])
    bound = len(trial_figure(winner["levels"]).bound_levels)
    return {
        "seed": seed,
        "trial": winner["trial"],
        "config": winner["config"],
        "measured_mean": winner["mean"],
        "spread": winner["spread"] / winner["mean"] if winner["mean"] else 0.0,
        "runs": winner["runs"],
        "winner_bound_levels": bound,
        "study_bound_levels": study_bound,
        "study_flagged_levels": flagged,
        "study_levels": study_levels,
        "complete_trials": len(finished),
        "best_measured_model_figure": measured_best,
        "model_figure": exported,
        "wall_s": round(wall_s, 1),
        "summary": (optimize.stderr + optimize.stdout)[-4000:],
    }


def seed_line(result: dict, best_value: float) -> str:
    """One seed's figures; a spread over one run is the study's assumed noise, not a re-measure."""
    if "error" in result:
        return f"seed {result['seed']}: failed after {result['wall_s']:.0f} s: {result['error']}"
    spread = (f"+- {result['spread']:.1%} over {result['runs']} runs" if result["runs"] > 1
              else f"not re-measured (1 run; +- {result['spread']:.1%} is the study's noise, assumed)")
    return (f"seed {result['seed']}: trial {result['trial']} exported/best {result['ratio']:.3f} "
            f"({result['model_figure']:,.0f} of {best_value:,.0f} tok/s), measured "
            f"{result['measured_mean']:,.0f} tok/s {spread}, "
            f"bound levels {result['winner_bound_levels']} in the winner, {result['study_bound_levels']} "
            f"of {result['study_levels']} in the study ({result['study_flagged_levels']} flagged); "
            f"best configuration it measured {result['best_measured_model_figure'] / best_value:.3f}; "
            f"{result['complete_trials']} complete trials; wall {result['wall_s']:.0f} s")


def summarise(results: list[dict]) -> dict:
    """Issue 39's target over the seeds: every export within 5% and re-measured within 5%."""
    done = [r for r in results if "error" not in r]
    remeasured = [r for r in done if r["runs"] > 1]
    ratio_met = len(done) == len(results) and all(r["ratio"] >= TARGET_RATIO for r in done)
    spread_met = len(remeasured) == len(results) and all(r["spread"] <= TARGET_SPREAD for r in remeasured)
    return {
        "min_ratio": min((r["ratio"] for r in done), default=None),
        "max_remeasured_spread": max((r["spread"] for r in remeasured), default=None),
        "winners_remeasured": len(remeasured),
        "ratio_target_met": ratio_met,
        "target_met": ratio_met and spread_met,
    }


def summary_line(summary: dict, seeds: int) -> str:
    spread = summary["max_remeasured_spread"]
    return (f"summary: min exported/best {summary['min_ratio']:.3f} (target >= {TARGET_RATIO}: "
            f"{'met' if summary['ratio_target_met'] else 'NOT met'}); winners re-measured on "
            f"{summary['winners_remeasured']} of {seeds} seeds, max re-measured spread "
            f"{'-' if spread is None else f'{spread:.1%}'} (target <= {TARGET_SPREAD:.0%} on every seed); "
            f"target {'met' if summary['target_met'] else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--port", type=int, default=30311)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--reprint", type=Path, default=None, help="print a saved run's figures again")
    options = parser.parse_args()
    if options.reprint:
        saved = json.loads(options.reprint.read_text())
        best_value = saved["best_in_space"]["figure"]
        print(f"best in the space (server's own figure): {best_value:,.0f} tok/s {saved['best_in_space']['config']}")
        for result in saved["seeds"]:
            print(seed_line(result, best_value))
        print(summary_line(summarise(saved["seeds"]), len(saved["seeds"])))
        return
    best_value, best_config = best_in_space()
    print(f"best in the space (server's own figure): {best_value:,.0f} tok/s {best_config}")
    results = []
    for seed in options.seeds:
        result = run_seed(seed, options.trials, options.port)
        if "error" not in result:
            result["ratio"] = result["model_figure"] / best_value
        print(seed_line(result, best_value), flush=True)
        results.append(result)
    summary = summarise(results)
    print(summary_line(summary, len(results)))
    if options.out:
        options.out.parent.mkdir(parents=True, exist_ok=True)
        options.out.write_text(json.dumps({
            "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
            "best_in_space": {"figure": best_value, "config": best_config},
            "seeds": results, **summary}, indent=2) + "\n")


if __name__ == "__main__":
    main()
