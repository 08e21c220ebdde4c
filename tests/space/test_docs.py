"""docs/search-space.md: its examples, put together, are a search space that loads."""

from __future__ import annotations

import re
from itertools import pairwise

import yaml

from tests.support.space import REPO
from tuner.space import load_space

DOC = REPO / "docs" / "search-space.md"


def _sections() -> dict:
    """The doc's ```yaml blocks that are whole top-level sections, merged."""
    merged: dict = {}
    for block in re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S):
        data = yaml.safe_load(block)
        if isinstance(data, dict) and not block.startswith((" ", "when")):
            merged.update(data)
    return merged


def test_documented_examples_load(write_space):
    data = _sections()
    assert {"host", "server", "patches", "parameters", "constraints", "workload", "objective",
            "probe"} <= set(data)
    data["baseline"] = {
        "moe_runner_backend": "flashinfer_trtllm", "cuda_graph": True,
        "max_running_requests": 64, "mem_fraction_static": 0.92, "chunked_prefill_size": None,
        "allreduce_fusion": False, "chunked_prefill": True, "health_generation": "1",
    }
    space = load_space(write_space(data))
    spec = space.render(space.baseline, resolve=False)
    assert spec.env["HF_TOKEN"] == "${HF_TOKEN}"
    assert spec.masked_env()["HF_TOKEN"] == "***"
    assert ("--cuda-graph-bs", "1") in pairwise(spec.argv)
    assert "--enable-chunked-prefill" in spec.argv
    assert spec.env["SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION"] == "1"
