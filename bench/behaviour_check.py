"""Did a change of the code leave behaviour alone? ``python bench/behaviour_check.py BEFORE [AFTER]``

A refactoring must not change what the tuner does (issue 26.8). This script checks out the git
revision BEFORE (and AFTER; default: this working tree, uncommitted changes included) into scratch
worktrees and runs, in each, one after the other on this machine:

1. the emulated demo, seeded: ``tuner optimize search_spaces/glm5.yaml --trials N --emulate --seed
   S``, then ``tuner trials --json``, ``tuner best --json`` and ``tuner export``. A seeded study
   draws the emulator's noise from its seed (``Target.server_command``), so the same code gives
   the same trials and the same figures; what is left is this machine's timing (0.000% on a quiet
   machine, docs/measurements.md);
2. the search benchmark (landscape replays, no clock): ``bench/search_efficiency.py --family
   emulator --seeds 0-3`` and ``--family generated --seeds 100-103``, guided, ``--per-seed``.

It prints how many trials ran the same configuration with the same state and move kind, the
largest difference of their figures, the best trial of each with its figure, whether the exported
launch scripts are the same (their run folders aside) and whether the benchmark's tables are
identical; the exit status is 0 only when all of that is the same. Revisions older than the seeded
emulator (2026-12-05) draw their noise at random: their figures differ by the emulator's noise
(2% a run), so compare their configurations only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCHES = (("emulator", "0-3", "40"), ("generated", "100-103", "60"))


@dataclass
class Outcome:
    """What one tree did: the demo's trials, its best, its export, and the benchmark's tables."""

    label: str
    trials: list[dict[str, Any]]
    best: dict[str, Any]
    export: str
    tables: list[str]
    seconds: float


def _run(command: list[str], cwd: Path, tree: Path, timeout: float = 1800) -> str:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} in {cwd} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return done.stdout


def measure(label: str, tree: Path, scratch: Path, trials: int, seed: int) -> Outcome:
    """The demo and the benchmark on ``tree`` (a checkout), in ``scratch``."""
    work = scratch / label
    work.mkdir()
    shutil.copytree(tree / "search_spaces", work / "search_spaces")
    tuner = [sys.executable, "-m", "tuner"]
    space, storage = "search_spaces/glm5.yaml", "studies/glm5-emulated.db"
    started = time.monotonic()
    _run([*tuner, "optimize", space, "--trials", str(trials), "--emulate", "--seed", str(seed)], work, tree)
    seconds = time.monotonic() - started
    rows = json.loads(_run([*tuner, "trials", space, "--storage", storage, "--json"], work, tree))
    best = json.loads(_run([*tuner, "best", space, "--storage", storage, "--json"], work, tree))
    _run([*tuner, "export", space, "--storage", storage, "--out", "launch.sh"], work, tree)
    export = (work / "launch.sh").read_text().replace(str(work), "<run folder>")
    tables = []
    for family, seeds, budget in BENCHES:
        out = _run([sys.executable, str(tree / "bench" / "search_efficiency.py"), "--family", family, "--seeds", seeds,
                    "--strategies", "guided", "--budget", budget, "--processes", "1", "--per-seed"], work, tree)
        tables.append(re.sub(r"; \d+ s$", "", out.strip()))  # the wall time aside
    return Outcome(label, rows, best, export, tables, seconds)


def _config(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k.startswith("config.")}


def _move(row: dict[str, Any]) -> str:
    return str(row.get("chosen_by") or "").split(":")[0]


def compare(before: Outcome, after: Outcome) -> bool:
    """Print the comparison; True when the two trees behaved the same."""
    pairs = list(zip(before.trials, after.trials))
    same = sum(_config(a) == _config(b) and a["state"] == b["state"] and _move(a) == _move(b) for a, b in pairs)
    gaps = [abs(a["value"] - b["value"]) / a["value"] for a, b in pairs if a.get("value") and b.get("value")]
    first = next((a["number"] for a, b in pairs if _config(a) != _config(b)), None)
    print(f"demo: {len(before.trials)} and {len(after.trials)} trials; {same} of {len(pairs)} the same "
          f"configuration, state and kind of move" + (f" (first different: trial {first})" if first is not None else ""))
    largest = max(gaps, default=0.0)
    print(f"demo: figures of {len(gaps)} completed trials differ by {100 * largest:.3f}% at most")
    for outcome in (before, after):
        print(f"  {outcome.label}: best trial {outcome.best['trial']}, {outcome.best['output_throughput']:,.1f} "
              f"output tok/s {'(emulated)' if outcome.best.get('emulated') else ''}; demo {outcome.seconds:.0f} s")
    same_best = before.best["config"] == after.best["config"]
    same_export = before.export == after.export
    same_tables = before.tables == after.tables
    print(f"best configuration the same: {same_best}; exported script the same: {same_export}; "
          f"benchmark tables identical: {same_tables}")
    for b_table, a_table in zip(before.tables, after.tables):
        if b_table != a_table:
            print(f"--- before\n{b_table}\n--- after\n{a_table}")
    ratio = (after.seconds / before.seconds) if before.seconds else float("nan")
    print(f"demo wall time after / before: {ratio:.2f}x (same machine, one after the other)")
    return same == len(pairs) == len(after.trials) and largest < 0.01 and same_best and same_export and same_tables


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="a git revision (commit, branch, tag)")
    parser.add_argument("after", nargs="?", default=None, help="a git revision (default: this working tree)")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    options = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="tuner-behaviour-"))
    trees: list[Path] = []
    try:
        outcomes = []
        for label, revision in (("before", options.before), ("after", options.after)):
            if revision is None:
                tree = REPO
            else:
                tree = scratch / f"tree-{label}"
                subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), revision],
                               check=True, capture_output=True)
                trees.append(tree)
            print(f"{label}: {revision or 'working tree'} ({tree})", flush=True)
            outcomes.append(measure(label, tree, scratch, options.trials, options.seed))
        return 0 if compare(*outcomes) else 1
    finally:
        for tree in trees:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
