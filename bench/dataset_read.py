"""How long reading a ShareGPT file of the usual size takes, and how much memory it holds.

A ShareGPT file like the one bench_serving uses (about 90,000 conversations, 600 MB) is generated
in a temporary folder, then read in two fresh processes, each timed, with its peak resident memory
(``ru_maxrss``) taken by the process itself:

- the tuner's reader: ``tuner.loadgen.load_file_pool`` (streamed, a uniform sample of 2,000
  requests kept, as a study keeps by default);
- the reference: ``json.load`` of the same file (what holding the whole file costs).

It prints both and their ratios. Target: the tuner's read in seconds (under 30 s on this 2-core
machine) and its peak memory a small fraction of ``json.load``'s.

Run: ``python bench/dataset_read.py [--conversations 90000] [--sample 2000] [--keep FILE]``
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS = ("the of and to in is for on that with as it by at from this be are was or an have not "
         "you but all can has more one will they we their time new been about which other than "
         "out into some up only its over what when also after two first naïve café ☃ 数据").split()

OURS = """
import resource, sys, time
sys.path.insert(0, {repo!r})
from tuner.loadgen import load_file_pool
t = time.perf_counter()
pool = load_file_pool({path!r}, sample={sample})
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, len(pool.requests), pool.entries)
"""
REFERENCE = """
import json, resource, time
t = time.perf_counter()
with open({path!r}, encoding="utf-8") as handle:
    data = json.load(handle)
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, len(data), len(data))
"""
BASELINE = """
import resource
print(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, 0, 0)
"""


def generate(path: Path, conversations: int, seed: int = 0) -> None:
    """A ShareGPT-format file: conversations of 2-6 turns, about 6.7 KB each on average (turns
    are drawn from a pool of generated texts, so that writing 600 MB takes seconds)."""
    rng = random.Random(seed)
    pool = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 810))) for _ in range(4000)]
    with path.open("w", encoding="utf-8") as out:
        out.write("[")
        for i in range(conversations):
            turns = [{"from": "human" if t % 2 == 0 else "gpt", "value": rng.choice(pool)}
                     for t in range(rng.choice((2, 2, 4, 6)))]
            out.write(("," if i else "") + "\n  " + json.dumps({"id": f"c{i}", "conversations": turns},
                                                              ensure_ascii=False))
        out.write("\n]\n")


def measure(script: str) -> tuple[float, float, int, int]:
    """``(seconds, peak MB, kept, entries)`` printed by ``script`` run in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    seconds, peak_kb, kept, entries = done.stdout.split()
    return float(seconds), int(peak_kb) / 1024, int(kept), int(entries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=90_000)
    parser.add_argument("--sample", type=int, default=2000)
    parser.add_argument("--keep", type=Path, help="write the generated file here (and reuse it)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = args.keep or Path(folder) / "sharegpt.json"
        if not path.exists():
            started = time.perf_counter()
            generate(path, args.conversations)
            print(f"generated {path.stat().st_size / 1e6:,.0f} MB, {args.conversations:,} conversations "
                  f"in {time.perf_counter() - started:.1f} s")
        size_mb = path.stat().st_size / 1e6
        _, interpreter_mb, _, _ = measure(BASELINE)
        ours = measure(OURS.format(repo=str(REPO), path=str(path), sample=args.sample))
        reference = measure(REFERENCE.format(path=str(path)))
    print(f"file: {size_mb:,.0f} MB; a bare interpreter peaks at {interpreter_mb:,.0f} MB")
    print(f"tuner (streamed, sample {ours[2]:,} of {ours[3]:,}): {ours[0]:6.1f} s, peak {ours[1]:7,.0f} MB")
    print(f"json.load (whole file, {reference[2]:,}):        {reference[0]:6.1f} s, peak {reference[1]:7,.0f} MB")
    print(f"ratio tuner / json.load: time {ours[0] / reference[0]:.2f}x, peak memory {ours[1] / reference[1]:.3f}x")


if __name__ == "__main__":
    main()
