"""Does the emulated demo measure what the emulator's model says? ``python bench/emulated_fidelity.py``

Runs the shipped demo, ``tuner optimize search_spaces/glm5.yaml --trials 40 --emulate``, in a
scratch directory (or reads a finished one: ``--study-dir DIR``), then holds every level of
every COMPLETE trial against the model the emulated server paces its tokens with
(:func:`tuner.emulator.predict_throughput`, noiseless, for the level's configuration, patches,
concurrency, request count and lengths). Prints one line per level (measured / model) and a
summary: the median and worst ratio of the clean levels, how many lie within +-10% (the
emulator's noise is at most +-6.5%), how many levels were flagged measurement-bound (kept, not
ranked), baseline and best (emulated), the demo's wall time and the machine's load.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tuner.emulator import predict_throughput  # noqa: E402
from tuner.emulator.cli_args import parse_server_args  # noqa: E402
from tuner.space import load_space  # noqa: E402
from tuner.study.storage import default_storage_url, open_storage  # noqa: E402
from tuner.study.record import COMMAND_LINE, IS_BASELINE, LEVELS, PATCHES, Level, read_levels  # noqa: E402

TOLERANCE = 0.10


def _load() -> str:
    return Path("/proc/loadavg").read_text().split(" ", 3)[:3].__str__()


def run_demo(space: Path, workdir: Path, trials: int, extra: list[str] = (), *,
             quiet: bool = False) -> float:
    """Run the demo in ``workdir`` (``extra``: more ``tuner optimize`` options); its wall
    seconds. ``quiet``: its output goes to ``workdir/optimize.log``."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.monotonic()
    command = [sys.executable, "-m", "tuner.cli", "optimize", str(space), "--trials", str(trials),
               "--emulate", *extra]
    if quiet:
        with open(workdir / "optimize.log", "w") as log:
            subprocess.run(command, cwd=workdir, env=env, check=True, stdout=log,
                           stderr=subprocess.STDOUT)
    else:
        subprocess.run(command, cwd=workdir, env=env, check=True)
    return time.monotonic() - started


def _flags(command_line: str) -> dict[str, Any]:
    argv = shlex.split(command_line)
    start = argv.index("tuner.emulator") + 1 if "tuner.emulator" in argv else 1
    args = parse_server_args(argv[start:])
    return {k: v for k, v in args.items() if k not in ("time_scale", "emulator_seed")}


def model_figure(trial: optuna.trial.FrozenTrial, level: Level, workload: Any) -> float:
    patches = set(trial.user_attrs.get(PATCHES) or [])
    result = predict_throughput(
        _flags(trial.user_attrs[COMMAND_LINE]),
        "autotune_gate" in patches,
        "force_allreduce_fusion" in patches,
        int(level.concurrency),
        workload.input_len,
        workload.output_len,
        num_requests=int(level.num_requests),
    )
    return float(result) if isinstance(result, float) else float("nan")


def report(space_path: Path, workdir: Path) -> dict[str, Any]:
    """Print the per-level comparison and the summary of the study in ``workdir``."""
    space = load_space(space_path)
    workload = space.workload_for(True)
    storage = open_storage(default_storage_url(space_path, True, workdir / "studies"))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=space.name, storage=storage)
    ratios: list[float] = []
    flagged = 0
    max_failed = space.objective.max_failed_fraction
    print("trial  c     measured     model  ratio  note")
    for trial in study.get_trials(deepcopy=False):
        if COMMAND_LINE not in trial.user_attrs:
            continue  # reused: a copy of a trial that ran, not a run of its own
        for level in read_levels(trial.user_attrs.get(LEVELS)):
            if level.measurement_bound:
                flagged += 1
            if trial.state != optuna.trial.TrialState.COMPLETE:
                continue
            done = level.completed + level.failed
            clean = level.stop_reason is None and level.failed <= max_failed * max(1, done)
            model = model_figure(trial, level, workload)
            ratio = level.output_throughput / model if model == model and model > 0 else None
            note = "measurement-bound" if level.measurement_bound else (
                "" if clean else "not clean")
            if clean and not level.measurement_bound and ratio is not None:
                ratios.append(ratio)
            shown = f"{ratio:5.3f}" if ratio is not None else "  -  "
            print(f"{trial.number:5d} {level.concurrency:5d} {level.output_throughput:10,.0f}"
                  f" {model:9,.0f}  {shown}  {note}")
    complete = [t for t in study.get_trials(deepcopy=False) if t.values]
    baseline = next((t.values[0] for t in complete if t.user_attrs.get(IS_BASELINE)), None)
    best = max((t.values[0] for t in complete), default=None)
    within = sum(abs(r - 1) <= TOLERANCE for r in ratios)
    summary = {
        "levels": len(ratios),
        "median": statistics.median(ratios) if ratios else None,
        "worst": max(ratios, key=lambda r: abs(r - 1)) if ratios else None,
        "within": within,
        "flagged": flagged,
        "baseline": baseline,
        "best": best,
    }
    print(f"\nclean levels of COMPLETE trials: {len(ratios)}; measured/model median "
          f"{summary['median']:.3f}, worst {summary['worst']:.3f}; {within} of {len(ratios)} "
          f"within +-{TOLERANCE:.0%}; {flagged} level(s) flagged measurement-bound"
          if ratios else "\nno clean level")
    if baseline is not None and best is not None:
        print(f"baseline {baseline:,.0f}, best {best:,.0f} output tok/s (emulated); "
              f"{len(complete)} COMPLETE of {len(study.trials)} trials")
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", type=Path, default=REPO / "search_spaces/glm5.yaml")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--study-dir", type=Path, help="report on a finished demo in this folder")
    parser.add_argument("--strategy", help="tuner optimize --strategy (default: the product's)")
    parser.add_argument("--seed", type=int, help="tuner optimize --seed")
    args = parser.parse_args(argv)
    extra = [*(["--strategy", args.strategy] if args.strategy else []),
             *(["--seed", str(args.seed)] if args.seed is not None else [])]
    workdir = args.study_dir
    if workdir is None:
        workdir = Path(tempfile.mkdtemp(prefix="emulated-fidelity-"))
        print(f"load before: {_load()}; tuner optimize {' '.join(extra)}", flush=True)
        wall = run_demo(args.space.resolve(), workdir, args.trials, extra)
        print(f"\ndemo: {args.trials} trials in {wall:.0f} s wall ({workdir}); "
              f"load after: {_load()}\n", flush=True)
    report(args.space.resolve(), workdir.resolve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
