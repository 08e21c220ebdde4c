""""keeps failing" puts a failure down to a value only when the evidence supports it: what the
failure names, else the trial's values that fail most often. In real Optuna storage (SQLite)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState, create_trial

from tuner.study.trial import blamed_values, failing_values

BASE = {"moe_runner_backend": "flashinfer_cutlass", "cuda_graph": True,
        "attention_backend": "flashinfer", "mem_fraction_static": 0.9}


def study_of(tmp_path: Path, trials: list[tuple[dict[str, Any], str | None, str]]
             ) -> optuna.Study:
    """Trials as (changes to BASE, failure reason or None for COMPLETE, failure detail)."""
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s",
                                direction="maximize")
    for changes, reason, detail in trials:
        attrs: dict[str, Any] = {"config": {**BASE, **changes}}
        if reason:
            attrs |= {"failure_reason": reason, "failure_detail": detail}
        study.add_trial(create_trial(
            state=TrialState.FAIL if reason else TrialState.COMPLETE,
            value=None if reason else 1000.0, user_attrs=attrs))
    return study


REFUSAL = "ValueError: triton MoE runner does not support modelopt_fp4 weights"


def test_start_up_refusals_of_a_backend_are_not_blamed_on_cuda_graphs(tmp_path: Path) -> None:
    study = study_of(tmp_path, [
        *[({"moe_runner_backend": "triton", "cuda_graph": False}, "startup-crash", REFUSAL)] * 3,
        ({"cuda_graph": False}, None, ""),  # graphs off run fine with another backend
        *[({}, None, "")] * 3,
    ])
    found = failing_values(study)
    assert found == ["moe_runner_backend=triton: 3 of 3 trials failed (startup-crash)"]
    assert not any(line.startswith("cuda_graph=false") for line in found)  # 3 of 4 before


def test_without_a_name_in_the_detail_the_value_that_always_fails_explains_it(
        tmp_path: Path) -> None:
    study = study_of(tmp_path, [
        *[({"attention_backend": "fa3", "cuda_graph": False}, "wrong-output",
           "outputs differ from the baseline's on 3 of 3 prompts")] * 3,
        ({"attention_backend": "fa3"}, "wrong-output", "outputs differ"),
        ({"cuda_graph": False}, None, ""),
        *[({}, None, "")] * 3,
    ])
    found = failing_values(study)
    assert found == ["attention_backend=fa3: 4 of 4 trials failed (wrong-output)"]


def test_a_dimension_that_really_fails_is_still_reported(tmp_path: Path) -> None:
    study = study_of(tmp_path, [
        *[({"cuda_graph": False, "moe_runner_backend": backend}, "unstable-at-1024",
           "crash: RuntimeError: CUDA error: an illegal memory access was encountered")
          for backend in ("triton", "flashinfer_trtllm", "auto")],
        ({"moe_runner_backend": "triton"}, None, ""),
        ({"moe_runner_backend": "flashinfer_trtllm"}, None, ""),
        ({"moe_runner_backend": "auto"}, None, ""),
        *[({}, None, "")] * 2,
    ])
    assert failing_values(study) == ["cuda_graph=false: 3 of 3 trials failed (unstable-at-1024)"]


def test_a_value_seen_once_does_not_outweigh_one_that_failed_every_time() -> None:
    from collections import Counter
    ran = Counter({("a", "x"): 4, ("b", "rare"): 1, ("b", "common"): 3})
    failures = [({"a": "x", "b": "common"}, "")] * 3 + [({"a": "x", "b": "rare"}, "")]
    assert blamed_values(ran, failures)[-1] == {("a", "x")}
