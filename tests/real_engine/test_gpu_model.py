"""The model the H200 study serves (bench/gpu/make_model.py), made here on the CPU, small: its
tokenizer gives the client's random text prompts the length asked and a token run of their own,
and greedy decoding never ends a reply early (the end-of-sequence logit is zeroed).

Runs with the vllm venv's Python (it has torch and transformers), marked `vllm` with the other
tests that need that venv.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.real_engine.conftest import REPO, VLLM_PYTHON

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(600)]

_CHECK = r"""
import json, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
sys.path.insert(0, sys.argv[2])
from tuner.loadgen import make_prompts
out = sys.argv[1]
tok = AutoTokenizer.from_pretrained(out)
model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
prompts = make_prompts(3, 128, seed=7, api="openai-chat")  # the client's text prompts
ids = [tok(p)["input_ids"] for p in prompts]
torch.manual_seed(0)
outputs = []
for row in ids[:2]:
    generated = model.generate(torch.tensor([row]), max_new_tokens=24, do_sample=False,
                               eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    outputs.append(generated[0, len(row):].tolist())
print(json.dumps({
    "lengths": [len(r) for r in ids],
    "unknown": sum(r.count(tok.unk_token_id) for r in ids),
    "distinct": len({tuple(r) for r in ids}),
    "eos_row_zero": bool((model.lm_head.weight[tok.eos_token_id] == 0).all()),
    "output_lengths": [len(o) for o in outputs],
    "eos_in_outputs": sum(o.count(tok.eos_token_id) for o in outputs),
}))
"""


def test_the_gpu_study_s_model_takes_the_client_s_prompts_and_never_stops_early(tmp_path: Path) -> None:
    if not VLLM_PYTHON.exists():
        pytest.fail(f"{VLLM_PYTHON} is missing: run `bash .ci/install_vllm.sh` (or .ci/install)")
    out = tmp_path / "model"
    env = {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    made = subprocess.run([str(VLLM_PYTHON), str(REPO / "bench/gpu/make_model.py"), str(out),
                           "--layers", "1", "--experts", "4"],
                          capture_output=True, text=True, timeout=300, env=env, check=False)
    assert made.returncode == 0, made.stderr[-2000:]
    facts = json.loads(made.stdout.strip().splitlines()[-1])
    assert facts["layers"] == 1 and facts["experts"] == 4 and facts["dtype"] == "bfloat16"
    checked = subprocess.run([str(VLLM_PYTHON), "-c", _CHECK, str(out), str(REPO)],
                             capture_output=True, text=True, timeout=300, env=env, check=False)
    assert checked.returncode == 0, checked.stderr[-2000:]
    seen = json.loads(checked.stdout.strip().splitlines()[-1])
    assert seen["lengths"] == [128, 128, 128]  # one token a word: the length asked
    assert seen["unknown"] == 0 and seen["distinct"] == 3  # no run of <unk> shared by every prompt
    assert seen["eos_row_zero"]
    assert seen["output_lengths"] == [24, 24] and seen["eos_in_outputs"] == 0
