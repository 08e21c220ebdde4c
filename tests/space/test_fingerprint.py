"""The fingerprint: what makes results comparable changes it; order, comments and hosts do not."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.support.space import GLM5
from tuner.space import load_space


def _shuffled(value: Any, rng: random.Random, keep_order: bool = False) -> Any:
    """The same document with mapping keys in a random order (except the parameters', whose
    order is meaningful: a condition reads parameters declared before it)."""
    if isinstance(value, dict):
        keys = list(value)
        if not keep_order:
            rng.shuffle(keys)
        return {k: _shuffled(value[k], rng, keep_order=(k == "parameters")) for k in keys}
    if isinstance(value, list):
        return [_shuffled(v, rng) for v in value]
    return value


@pytest.fixture
def reference():
    return load_space(GLM5).fingerprint()


def test_stable_across_key_order(glm5_data, write_space, reference):
    # The reference is read from the commented file; these are re-dumped without comments.
    for seed in range(3):
        shuffled = _shuffled(glm5_data, random.Random(seed))
        assert list(shuffled) != list(glm5_data)
        space = load_space(write_space(shuffled))
        assert space.fingerprint() == reference


def test_is_a_sha256(reference):
    assert len(reference) == 64 and int(reference, 16) >= 0


@pytest.mark.parametrize("change", [
    lambda d: d["workload"].update(levels=[64, 256, 512]),
    lambda d: d["workload"].update(output_len=128),
    lambda d: d["workload"]["emulated"].update(output_len=32),
    lambda d: d["objective"].update(prune_margin=0.2),
    lambda d: d["baseline"].update(max_running_requests=128),
    lambda d: d["parameters"]["attention_backend"]["choices"].append("flashmla"),
    lambda d: d["parameters"]["mem_fraction_static"].update(high=0.95),
    lambda d: d["constraints"].pop(0),
    lambda d: d["server"]["flags"].update({"--quantization": "modelopt_fp8"}),
    lambda d: d["server"].update(command="/opt/venv/bin/python -m sglang.launch_server"),
    lambda d: d["patches"]["autotune_gate"].update(replace='            "flashinfer_cutlass",\n'),
    lambda d: d["probe"].update(prompts=["Once upon a time"], min_matching_prompts=1),
], ids=["levels", "output_len", "emulated", "prune_margin", "baseline", "choices", "range",
        "constraints", "fixed flag", "command", "patch", "probe prompts"])
def test_changed_by_what_changes_results(glm5_data, write_space, reference, change):
    change(glm5_data)
    assert load_space(write_space(glm5_data)).fingerprint() != reference


@pytest.mark.parametrize("change", [
    lambda d: d["host"].update(address="other-gpu-host", port=2222),
    lambda d: d["timeouts"].update(ready_s=1200),
    lambda d: d.update(name="glm5-second-try"),
    lambda d: d["parameters"]["moe_runner_backend"].update(description="the MoE kernels"),
    lambda d: d["parameters"]["mem_fraction_static"].update(log=False),   # a default, written
    lambda d: d["server"].update(port=31000),
    lambda d: d["objective"].update(noise=0.05),   # judges a close pair, changes no measurement
], ids=["host", "timeouts", "name", "description", "explicit default", "port", "stated noise"])
def test_unchanged_by_what_does_not(glm5_data, write_space, reference, change):
    change(glm5_data)
    assert load_space(write_space(glm5_data)).fingerprint() == reference

