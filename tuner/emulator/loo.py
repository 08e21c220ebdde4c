"""Leave-one-out check of the emulator's fit: ``python -m tuner.emulator.loo``.

The fitted numbers (:mod:`tuner.emulator.fitted`) reproduce the calibration table by
construction, so matching the table proves nothing by itself. Here each calibrated figure is
left out in turn: the number that belongs to it is removed (an anchor of a curve by batch
size: the curve then interpolates, or extrapolates, from the other anchors; B's wake-up or its
trtllm gain: set to neutral, 0 s or 1.0), the rest is fitted again without that figure, and the
figure is predicted. The error is how far the model's shape carries without that point. B's
c=512 and c=1024 have no number of their own (they follow from the cap of 64): they are
predictions already. ``fitted.py`` is left as it was.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from tuner.emulator import fitted
from tuner.emulator.calibration import CALIBRATION_POINTS, point
from tuner.emulator.fit import FITTED_NAMES, _predict_row, fit

__all__ = ["LooResult", "leave_one_out", "main"]

ROUNDS = 25
ROW_CURVES = {
    "N-on-unpatched": "CUTLASS_STEP_S",
    "N-on": "AUTOTUNE_GAIN",
    "N-off": "EAGER_GAIN",
    "F": "FORCED_ALLREDUCE_STEP_S",
}


@dataclass(frozen=True)
class LooResult:
    """One calibrated figure predicted by a fit without it."""

    row: str
    concurrency: int
    table: float
    predicted: float | str

    @property
    def error(self) -> float | None:
        if isinstance(self.predicted, str):
            return None
        return self.predicted / self.table - 1


def _remove(row: str, level: int) -> None:
    """Take the number that belongs to calibrated figure (row, level) out of the model."""
    if row in ROW_CURVES:
        name = ROW_CURVES[row]
        setattr(fitted, name, tuple((b, v) for b, v in getattr(fitted, name) if b != level))
    elif (row, level) == ("B", 64):
        fitted.IDLE_WAKEUP_S = 0.0
    elif (row, level) == ("B", 256):
        fitted.TRTLLM_GAIN_64 = 1.0


def leave_one_out(rounds: int = ROUNDS) -> list[LooResult]:
    """Every numeric calibrated figure, predicted by a fit without it."""
    saved = {name: getattr(fitted, name) for name in FITTED_NAMES}
    results = []
    try:
        for row in CALIBRATION_POINTS:
            for level, target in row.throughput.items():
                if not isinstance(target, (int, float)):
                    continue
                _remove(row.id, level)
                fit(rounds, skip=(row.id, level))
                predicted = _predict_row(point(row.id))[level]
                results.append(LooResult(row.id, level, float(target), predicted))
                for name, value in saved.items():
                    setattr(fitted, name, value)
    finally:
        for name, value in saved.items():
            setattr(fitted, name, value)
    return results


def table(results: list[LooResult]) -> str:
    """The results as a Markdown table."""
    lines = ["| point | c | table | predicted without it | error |", "|---|---|---|---|---|"]
    for r in results:
        predicted = r.predicted if isinstance(r.predicted, str) else f"{r.predicted:,.0f}"
        error = "-" if r.error is None else f"{r.error:+.1%}"
        lines.append(f"| {r.row} | {r.concurrency} | {r.table:,.0f} | {predicted} | {error} |")
    errors = sorted(abs(r.error) for r in results if r.error is not None)
    if errors:
        lines.append("")
        lines.append(
            f"Median absolute error {errors[len(errors) // 2]:.1%}, "
            f"worst {errors[-1]:.1%}, over {len(errors)} figures."
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the leave-one-out table."""
    print(table(leave_one_out()))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
