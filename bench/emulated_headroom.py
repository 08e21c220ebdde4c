"""The seeds' configuration against the emulated best, on the same workload: ``python bench/emulated_headroom.py``

For the calibration workload (c=1,024, 2,048 requests of 256/256) and the demo's
(``workload.emulated`` of ``search_spaces/glm5.yaml`` at its top level: one wave of 1,024
requests), prints the seeds' configuration's figure (N-on: ``flashinfer_cutlass``, the patched
autotune gate, CUDA graphs on), the best configuration the emulator's model allows
(:func:`tuner.emulator.headroom.best_figure`: every combination of the flags whose effects can
raise it), and what each flag of the best adds, the measured one first (the KV pool's formula,
``calibration.md``) and then the invented ones. All figures are the model's, noiseless, emulated
output tok/s. Exits 1 when the best on the calibration workload is above N-on's 3,740 by more
than :data:`tuner.emulator.headroom.BOUND`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tuner.emulator.calibration import point  # noqa: E402
from tuner.emulator.headroom import (  # noqa: E402
    BOUND,
    Workload,
    best_figure,
    calibration_workload,
    contributions,
    seeds_figure,
)
from tuner.space import load_space  # noqa: E402


def demo_workload(space_path: Path) -> Workload:
    """The demo's workload (``--emulate``) at its top concurrency level."""
    workload = load_space(space_path).workload_for(True)
    top = max(workload.levels)
    return Workload("demo", top, workload.requests_for(top), workload.input_len,
                    workload.output_len)


def report(workload: Workload) -> float:
    """Print one workload's comparison; the best's figure."""
    started = time.monotonic()
    seeds = seeds_figure(workload)
    best = best_figure(workload)
    print(f"{workload.name} workload: c={workload.concurrency}, {workload.num_requests} requests "
          f"of {workload.input_len}/{workload.output_len}")
    print(f"  seeds' configuration (N-on)  {seeds:7,.0f} output tok/s (emulated)")
    print(f"  best configuration           {best.throughput:7,.0f}  ({best.throughput / seeds - 1:+.1%})"
          f"  {best.describe()}")
    for part in contributions(best, workload):
        source = "measured (calibration.md's KV pool)" if part.measured else "invented"
        value = "" if part.value is True else f" {part.value}"
        print(f"    {part.gain - 1:+6.1%}  {part.flag}{value}  [{source}]")
    print(f"  ({time.monotonic() - started:.0f} s)")
    return best.throughput


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--space", type=Path, default=REPO / "search_spaces/glm5.yaml")
    options = parser.parse_args(argv)
    best = report(calibration_workload(1024))
    report(demo_workload(options.space))
    table = float(point("N-on").throughput[1024])
    within = best <= BOUND * table
    print(f"best on the calibration workload {best:,.0f} = {best / table:.3f} x N-on's {table:,.0f} "
          f"in calibration.md: {'within' if within else 'ABOVE'} the bound of {BOUND:.2f}")
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
