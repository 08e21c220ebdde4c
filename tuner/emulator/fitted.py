"""Numbers fitted to the calibration table by ``python -m tuner.emulator.fit``: do not edit.

Each is chosen so that :func:`tuner.emulator.perf_model.predict_throughput`, without noise,
reproduces ``calibration.py``'s table on the calibration workload. Step times are host seconds
of one decode step at a batch size; gains multiply the decode rate.
"""

from __future__ import annotations

CUTLASS_STEP_S = ((64, 0.07248), (256, 0.14477), (512, 0.20910), (1024, 0.28438))
AUTOTUNE_GAIN = ((64, 1.03255), (256, 1.34718), (512, 1.36133), (1024, 1.45537))
EAGER_GAIN = ((64, 0.88960), (256, 0.97025))
TRTLLM_GAIN_64 = 1.02764
IDLE_WAKEUP_S = 5.6753
FORCED_ALLREDUCE_STEP_S = ((64, 0.25791), (256, 1.06796), (512, 2.14802), (1024, 4.32713))
