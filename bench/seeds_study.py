"""Does the emulated demo find the seeds' answer on every seed? ``python bench/seeds_study.py``

Runs ``tuner optimize search_spaces/glm5.yaml --trials 40 --emulate --strategy guided --seed S``
for each seed (default 0-9), one at a time, each in its own scratch folder, and prints one row a
seed: wall time, the machine's 1-minute load before and after, the baseline and the best stable
trial (output tok/s, emulated), the winner's kind, and whether it is of the seeds' kind: the
cutlass MoE (``flashinfer_cutlass``) with the patched autotune gate, CUDA graphs on and no
``--max-running-requests`` cap below 1,024 (issue 12, item 6). ``--study-root DIR`` reports on
finished runs (``DIR/seed-S``) without running them again. ``--busy-core`` runs a
``while True: pass`` process beside each run (issue 13, item 3: the same kind of winner when one
of the cores is busy), started and killed by its PID.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import optuna

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from emulated_fidelity import run_demo  # noqa: E402
from tuner.space import load_space  # noqa: E402
from tuner.study.record import baseline_record, best_stable  # noqa: E402
from tuner.study.storage import default_storage_url, open_storage  # noqa: E402

TOP_LEVEL = 1024


def load_1min() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def seeds_kind(config: dict[str, Any]) -> bool:
    """The seeds' answer: cutlass MoE, patched gate, CUDA graphs on, no cap below 1,024."""
    cap = config.get("max_running_requests")
    return (
        config.get("moe_runner_backend") == "flashinfer_cutlass"
        and bool(config.get("autotune_gate"))
        and bool(config.get("cuda_graph"))
        and (cap is None or int(cap) >= TOP_LEVEL)
    )


def kind(config: dict[str, Any]) -> str:
    """A short description of a configuration's kind (the four features above)."""
    moe = str(config.get("moe_runner_backend"))
    if moe == "flashinfer_cutlass":
        moe += "+gate" if config.get("autotune_gate") else " (gate unpatched)"
    cap = config.get("max_running_requests")
    return (f"{moe}, graphs {'on' if config.get('cuda_graph') else 'off'}, "
            f"cap {'none' if cap is None else cap}")


def summarise(space_path: Path, workdir: Path) -> dict[str, Any]:
    """Baseline, best and the best's configuration of the demo study in ``workdir``."""
    space = load_space(space_path)
    storage = open_storage(default_storage_url(space_path, True, workdir / "studies"))
    study = optuna.load_study(study_name=space.name, storage=storage)
    base = baseline_record(study)
    best = best_stable(study)
    return {"baseline": base.value if base else None, "best": best.value,
            "number": best.number, "config": dict(best.config)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", type=Path, default=REPO / "search_spaces/glm5.yaml")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seeds", default="0-9", help="a range A-B or a list 0,3,7")
    parser.add_argument("--strategy", default="guided")
    parser.add_argument("--study-root", type=Path, help="report on finished runs in DIR/seed-S")
    parser.add_argument("--busy-core", action="store_true",
                        help="a busy loop beside each run (one core taken)")
    args = parser.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if "-" in args.seeds:
        low, high = (int(x) for x in args.seeds.split("-"))
        seeds = list(range(low, high + 1))
    else:
        seeds = [int(x) for x in args.seeds.split(",")]
    space = args.space.resolve()
    root = args.study_root or Path(tempfile.mkdtemp(prefix="seeds-study-"))
    print(f"tuner optimize {args.space.name} --trials {args.trials} --emulate --strategy "
          f"{args.strategy} --seed S, in {root}" + (", beside a busy loop" if args.busy_core else ""))
    print("seed  wall s  load before/after  baseline    best  trial  winner's kind"
          "                               seeds' kind")
    hits = 0
    for seed in seeds:
        workdir = root / f"seed-{seed}"
        wall, before, after = None, None, None
        if args.study_root is None:
            workdir.mkdir(parents=True)
            before = load_1min()
            busy = (subprocess.Popen([sys.executable, "-c", "while True: pass"])
                    if args.busy_core else None)
            try:
                wall = run_demo(space, workdir, args.trials,
                                ["--strategy", args.strategy, "--seed", str(seed)], quiet=True)
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
            after = load_1min()
        found = summarise(space, workdir)
        hit = seeds_kind(found["config"])
        hits += hit
        shown_wall = f"{wall:6.0f}" if wall is not None else "     -"
        shown_load = f"{before:5.1f} / {after:5.1f}" if before is not None else "      -      "
        base = f"{found['baseline']:8,.0f}" if found["baseline"] is not None else "       -"
        print(f"{seed:4d}  {shown_wall}  {shown_load}      {base} {found['best']:7,.0f}"
              f"  {found['number']:5d}  {kind(found['config']):44s} {'yes' if hit else 'no'}",
              flush=True)
    print(f"\n{hits} of {len(seeds)} seeds found the seeds' kind (target: at least 9 of 10); "
          "figures are emulated output tok/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
