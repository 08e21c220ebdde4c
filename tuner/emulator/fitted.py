"""Numbers fitted to the calibration table by ``python -m tuner.emulator.fit``: do not edit.

Each is chosen so that :func:`tuner.emulator.perf_model.predict_throughput`, without noise,
reproduces ``calibration.py``'s table on the calibration workload. Step times are host seconds
of one decode step at a batch size; gains multiply the decode rate.
"""

from __future__ import annotations

CUTLASS_STEP_S = ((64, 0.07103), (256, 0.14332), (512, 0.20765), (1024, 0.27890))
AUTOTUNE_GAIN = ((64, 1.03324), (256, 1.35192), (512, 1.36478), (1024, 1.46827))
EAGER_GAIN = ((64, 0.88753), (256, 0.96986))
TRTLLM_GAIN_64 = 1.02822
IDLE_WAKEUP_S = 3.4574
FORCED_ALLREDUCE_STEP_S = ((64, 0.25646), (256, 1.06651), (512, 2.14657), (1024, 4.32160))
