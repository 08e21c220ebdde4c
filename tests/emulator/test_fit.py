"""The emulator's fitted numbers are what its fit produces, from a neutral start."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.emulator import fit, fitted


def test_fitted_py_is_what_the_fit_produces(monkeypatch: pytest.MonkeyPatch) -> None:
    written = Path(fitted.__file__).read_text()
    # Start from numbers that know nothing of the table.
    monkeypatch.setattr(fitted, "CUTLASS_STEP_S", tuple((b, 0.1) for b, _ in fitted.CUTLASS_STEP_S))
    monkeypatch.setattr(fitted, "AUTOTUNE_GAIN", tuple((b, 1.0) for b, _ in fitted.AUTOTUNE_GAIN))
    monkeypatch.setattr(fitted, "EAGER_GAIN", tuple((b, 1.0) for b, _ in fitted.EAGER_GAIN))
    monkeypatch.setattr(fitted, "TRTLLM_GAIN_64", 1.0)
    monkeypatch.setattr(fitted, "IDLE_WAKEUP_S", 0.0)
    monkeypatch.setattr(fitted, "FORCED_ALLREDUCE_STEP_S",
                        tuple((b, 1.0) for b, _ in fitted.FORCED_ALLREDUCE_STEP_S))
    fit.fit(rounds=40)
    assert fit.render() == written
