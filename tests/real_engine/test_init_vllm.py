"""A user's whole path on a real engine: ``tuner init`` from a vLLM command on the vLLM CPU install,
a short study of the space it writes, unedited, on the tiny random-weight Llama
(tests/support/tiny_model.py), and ``tuner recheck`` of its winner on the vLLM installed now: its
``--help`` read for the version check, the baseline and the winner started afresh twice each,
interleaved, and a verdict that the winner still wins (32 sequences a step against 2 serve several
times the tokens on this CPU). One study for both: each vLLM start costs 25-100 s here."""

from __future__ import annotations

import re
import shlex
import socket
from pathlib import Path

import optuna
import pytest

from tests.real_engine.conftest import VLLM_PYTHON, run_tuner
from tuner.space import load_space
from tuner.study.record import repeats_of
from tuner.study.storage import load_existing_study, resolve_storage

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(2400)]  # six vLLM starts on 2 shared cores


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_space_written_from_a_vllm_command_runs_a_study_and_a_recheck(tiny_model: Path, tmp_path: Path) -> None:
    command = (f"VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 VLLM_HOST_IP=127.0.0.1 VLLM_NO_USAGE_STATS=1 "
               f"VLLM_CACHE_ROOT={tmp_path / 'vllm-cache'} "
               f"{VLLM_PYTHON} -m vllm.entrypoints.openai.api_server --model {tiny_model} --enforce-eager "
               f"--max-num-seqs 2 --port {_free_port()}")
    done = run_tuner("init", "--out", "tiny.yaml", "--levels", "4,16", "--input-len", "32", "--output-len", "32",
                     "--", *shlex.split(command), cwd=tmp_path, timeout=300)
    assert "note: no nvidia-smi on the host; assumed: a CPU host" in done.stderr
    path = tmp_path / "tiny.yaml"
    space = load_space(path)
    assert space.engine == "vllm" and space.engine_version == "0.32.0"
    assert {"max_num_seqs", "max_num_batched_tokens", "chunked_prefill", "prefix_caching", "block_size"} \
        == set(space.parameters)  # a CPU host: no GPU memory, CUDA-graph or parallel levers
    assert "--enforce-eager" in space.render(space.baseline).argv and space.baseline["max_num_seqs"] == 2

    run_tuner("enqueue", "tiny.yaml", "--set", "max_num_seqs=32", cwd=tmp_path, timeout=60)
    run_tuner("optimize", "tiny.yaml", "--trials", "2", "--seed", "3", cwd=tmp_path, timeout=1200)
    url, _ = resolve_storage(str(tmp_path / "studies" / "tiny.db"))
    study = load_existing_study(url, space.name)
    assert space.config_from_params(study.trials[0].params) == space.baseline
    assert study.trials[0].state == optuna.trial.TrialState.COMPLETE and study.trials[0].value > 0
    assert len(study.trials) == 2 and study.trials[1].user_attrs["config"]["max_num_seqs"] == 32

    done = run_tuner("recheck", "tiny.yaml", "--top", "1", "--runs", "2", cwd=tmp_path, timeout=900)
    said = done.stderr
    print(said[-3000:])  # `pytest -s`: then against now, and the verdict
    version = re.search(r"engine: (\S+) installed, as the study ran", said)
    assert version, said[-3000:]
    order = [line.split(": ", 1)[1] for line in said.splitlines() if line.startswith("recheck run ")]
    assert order == ["baseline (trial 0)", "winner (trial 1)"] * 2
    assert re.search(r"c=16 +then \(" + re.escape(version.group(1)) + r"\) [\d,]+ tok/s +now [\d,]+ tok/s "
                     r"\+- [\d.]+% over 2 runs +change [+-][\d.]+%", said), said[-3000:]
    assert "verdict: the winner STILL WINS: winner (trial 1)" in said
    assert "next: the export stands" in said
    recheck = load_existing_study(url, f"{space.name}-recheck-{version.group(1)}")
    trials = recheck.get_trials(deepcopy=False)
    assert [t.user_attrs["warm_start_from"] for t in trials] == [f"{space.name}#0", f"{space.name}#1"]
    assert all(len(r["values"]) == 2 for r in repeats_of(recheck.user_attrs).values())
