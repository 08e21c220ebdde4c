"""The emulated GLM-5 host: run the whole tuner without the 8-GPU machine (a stand-in).

``python -m tuner.emulator [SGLang 0.5.9 launch_server flags] [--time-scale K]`` starts an
SGLang-like server whose speed, start-up and failures follow ``calibration.md``. The pure
performance model (:func:`predict_throughput`) scores configurations without a server;
:func:`prepare_host_root` lays out an emulated host (stand-in ``sglang`` package, ``nvidia-smi``,
Python) for the host layer, locally or over SSH.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tuner.emulator.calibration import CALIBRATION_LEVELS, CALIBRATION_POINTS, CalibrationPoint
    from tuner.emulator.host_root import prepare_host_root
    from tuner.emulator.perf_model import EngineModel, Failure, build_engine, predict_throughput

# Imported on first use: the stand-in ``nvidia-smi`` (a new process several times a trial) and
# the server import only the modules they need, not the performance model.
_HOMES = {
    "CALIBRATION_LEVELS": "calibration",
    "CALIBRATION_POINTS": "calibration",
    "CalibrationPoint": "calibration",
    "prepare_host_root": "host_root",
    "EngineModel": "perf_model",
    "Failure": "perf_model",
    "build_engine": "perf_model",
    "predict_throughput": "perf_model",
}

__all__ = [
    "CALIBRATION_LEVELS",
    "CALIBRATION_POINTS",
    "CalibrationPoint",
    "EngineModel",
    "Failure",
    "build_engine",
    "predict_throughput",
    "prepare_host_root",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
