"""Fit :mod:`tuner.emulator.fitted` to the calibration table: ``python -m tuner.emulator.fit``.

Each fitted number belongs to one row of the table and is adjusted, a few dozen rounds, by the
ratio of the table's figure to the noiseless prediction of that row (see
:mod:`tuner.emulator.perf_model` for what each number means). ``--write`` rewrites
``fitted.py``; without it the module is printed. Run it after ``calibration.py`` changes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tuner.emulator import fitted
from tuner.emulator.calibration import CALIBRATION_POINTS, WORKLOAD, CalibrationPoint, point
from tuner.emulator.cli_args import parse_server_args
from tuner.emulator.perf_model import predict_throughput

__all__ = ["FITTED_NAMES", "fit", "predictions", "render"]

FITTED_NAMES = (
    "CUTLASS_STEP_S",
    "AUTOTUNE_GAIN",
    "EAGER_GAIN",
    "TRTLLM_GAIN_64",
    "IDLE_WAKEUP_S",
    "FORCED_ALLREDUCE_STEP_S",
)

ROUNDS = 25


def _flags(calibration_point: CalibrationPoint) -> dict[str, object]:
    args = parse_server_args(calibration_point.full_argv())
    return {k: v for k, v in args.items() if k not in ("time_scale", "emulator_seed")}


def _predict_row(row: CalibrationPoint) -> dict[int, float | str]:
    flags = _flags(row)
    figures: dict[int, float | str] = {}
    for concurrency in row.throughput:
        value = predict_throughput(flags, row.patched_gate, row.forced_allreduce, concurrency)
        figures[concurrency] = value if isinstance(value, float) else value.kind
    return figures


def predictions() -> dict[str, dict[int, float | str]]:
    """Noiseless predictions of every calibrated figure, by point id and concurrency."""
    return {row.id: _predict_row(row) for row in CALIBRATION_POINTS}


def _scaled(anchors: tuple, level: int, factor: float) -> tuple:
    return tuple((b, v * factor if b == level else v) for b, v in anchors)


Skip = tuple[str, int] | None  # a calibration point (row id, concurrency) left out of the fit


def _fit_row(row_id: str, name: str, stepwise: bool, skip: Skip = None) -> None:
    row = point(row_id)
    got = _predict_row(row)
    anchors = getattr(fitted, name)
    for level, target in row.throughput.items():
        if (row_id, level) == skip:
            continue
        measured = got[level]
        if not isinstance(target, (int, float)) or not isinstance(measured, float):
            continue
        if any(b == level for b, _ in anchors):
            ratio = measured / target if stepwise else target / measured
            anchors = _scaled(anchors, level, ratio)
    setattr(fitted, name, anchors)


def _fit_baseline(skip: Skip = None) -> None:
    """B: the trtllm gain from its queue-fed c=256, the idle wake-up from its c=64."""
    row = point("B")
    got = _predict_row(row)
    if skip != ("B", 256):
        fitted.TRTLLM_GAIN_64 *= float(row.throughput[256]) / float(got[256])
    if skip == ("B", 64):
        return
    tokens = WORKLOAD.num_requests(64) * WORKLOAD.output_len
    waves = WORKLOAD.num_requests(64) // 64
    slower_by = tokens / float(row.throughput[64]) - tokens / float(got[64])
    fitted.IDLE_WAKEUP_S = max(0.0, fitted.IDLE_WAKEUP_S + 0.5 * slower_by / waves)


def fit(rounds: int = ROUNDS, skip: Skip = None) -> None:
    """Adjust the numbers of :mod:`fitted` in place until the predictions match the table.

    One row at a time, in the order the rows depend on each other (Gauss-Seidel). ``skip``
    leaves one calibration point out (:mod:`tuner.emulator.loo`).
    """
    for _ in range(rounds):
        _fit_row("N-on-unpatched", "CUTLASS_STEP_S", stepwise=True, skip=skip)
        _fit_row("N-on", "AUTOTUNE_GAIN", stepwise=False, skip=skip)
        _fit_row("N-off", "EAGER_GAIN", stepwise=False, skip=skip)
        _fit_row("F", "FORCED_ALLREDUCE_STEP_S", stepwise=True, skip=skip)
        _fit_baseline(skip)


def _anchors(values: tuple) -> str:
    return "(" + ", ".join(f"({b}, {v:.5f})" for b, v in values) + ")"


def render() -> str:
    """The text of ``fitted.py`` for the current numbers."""
    head = (fitted.__doc__ or "").strip()
    return (
        f'"""{head}\n"""\n\nfrom __future__ import annotations\n\n'
        f"CUTLASS_STEP_S = {_anchors(fitted.CUTLASS_STEP_S)}\n"
        f"AUTOTUNE_GAIN = {_anchors(fitted.AUTOTUNE_GAIN)}\n"
        f"EAGER_GAIN = {_anchors(fitted.EAGER_GAIN)}\n"
        f"TRTLLM_GAIN_64 = {fitted.TRTLLM_GAIN_64:.5f}\n"
        f"IDLE_WAKEUP_S = {fitted.IDLE_WAKEUP_S:.4f}\n"
        f"FORCED_ALLREDUCE_STEP_S = {_anchors(fitted.FORCED_ALLREDUCE_STEP_S)}\n"
    )


def main(argv: list[str] | None = None) -> int:
    """Fit, report the worst relative error, and print or ``--write`` the module."""
    parser = argparse.ArgumentParser(prog="python -m tuner.emulator.fit")
    parser.add_argument("--write", action="store_true", help="rewrite tuner/emulator/fitted.py")
    args = parser.parse_args(argv)
    fit()
    got = predictions()
    worst = 0.0
    for row in CALIBRATION_POINTS:
        for level, target in row.throughput.items():
            if isinstance(target, (int, float)):
                worst = max(worst, abs(float(got[row.id][level]) / target - 1))
    print(f"worst relative error after fitting: {worst:.4%}", file=sys.stderr)
    if args.write:
        Path(fitted.__file__).write_text(render())
    else:
        print(render())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
