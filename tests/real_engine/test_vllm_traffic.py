"""The user's traffic on a real engine: vLLM on this machine's CPU (tiny random-weight Llama).

Random tokens hide what a prefix cache does; a shared-prefix workload (2 system prompts of 1,000
tokens, each request its own 16-token suffix) shows it: the tuner measures vLLM with prefix
caching off (the baseline) and on, and caching on must serve clearly more tokens per second. A
goodput study (highest request rate within a p99 TTFT limit) runs on the same engine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from tests.real_engine.test_vllm_study import REPO, _tuner, tiny_model  # noqa: F401 (fixture)
from tests.support.sshd import free_port
from tuner.study.storage import open_storage

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(3600)]

SHARED_PREFIX = {"kind": "shared_prefix", "groups": 2, "prefix_len": 1000, "suffix_len": 16}


def _space(tmp_path: Path, model: Path, workload: dict[str, Any], objective: dict[str, Any]) -> Path:
    document = yaml.safe_load((REPO / "search_spaces/vllm-cpu-tiny.yaml").read_text())
    document["server"]["flags"]["--model"] = str(model)
    document["server"]["port"] = free_port()
    document["server"]["env"]["VLLM_CACHE_ROOT"] = str(tmp_path / "vllm-cache")
    document["host"]["run_root"] = str(tmp_path / "runs")
    document["timeouts"]["ready_s"] = 900  # vLLM took 510 s to start at load average 20
    document["timeouts"]["level_s"] = 600  # 1,016-token prefills took seconds each at that load
    document["baseline"] = {**document["baseline"], "max_num_seqs": 8, "prefix_caching": False}
    document["workload"].update(workload)
    document["objective"] = objective
    space = tmp_path / "vllm-cpu-tiny.yaml"
    space.write_text(yaml.safe_dump(document, sort_keys=False))
    return space


def _trials(tmp_path: Path) -> list[optuna.trial.FrozenTrial]:
    storage = open_storage(str(tmp_path / "studies" / "vllm-cpu-tiny.db"))
    return optuna.load_study(study_name="vllm-cpu-tiny", storage=storage).get_trials()


def test_prefix_caching_pays_under_a_shared_prefix_workload(tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    workload = {"dataset": SHARED_PREFIX, "levels": [8], "output_len": 4, "requests_per_level": 40,
                "warmup": 2}
    space = _space(tmp_path, tiny_model, workload, {"metric": "total_throughput"})
    _tuner("enqueue", str(space), "--set", "prefix_caching=true", cwd=tmp_path, timeout=120)
    _tuner("optimize", str(space), "--trials", "2", "--seed", "3", cwd=tmp_path, timeout=3000)
    trials = _trials(tmp_path)
    values = {t.user_attrs["config"]["prefix_caching"]: t.value for t in trials
              if t.state == TrialState.COMPLETE}
    assert set(values) == {False, True}, [(t.number, t.state, t.user_attrs.get("failure_reason")) for t in trials]
    print(f"total tok/s, shared prefixes: caching off {values[False]:,.0f}, on {values[True]:,.0f}")
    assert values[True] >= 1.3 * values[False], values
    for trial in trials:
        assert "--no-enable-prefix-caching" in trial.user_attrs["command_line"] or \
            "--enable-prefix-caching" in trial.user_attrs["command_line"]
        level = trial.user_attrs["levels"][0]
        assert level["input_tokens"] >= 40 * 1016 and not level["input_tokens_estimated"]  # vLLM counted


def test_a_goodput_study_on_vllm(tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    workload = {"dataset": SHARED_PREFIX, "levels": [8], "output_len": 8, "warmup": 2,
                "requests_per_level": {"per_concurrency": 1, "min": 16}, "rate_level_s": 8,
                "max_concurrency": 64, "arrival": "poisson"}
    objective = {"metric": "goodput", "slo": {"p99_ttft_ms": 5000},
                 "goodput": {"start_rate": 1, "max_levels": 3}}
    space = _space(tmp_path, tiny_model, workload, objective)
    _tuner("enqueue", str(space), "--set", "prefix_caching=true", cwd=tmp_path, timeout=120)
    done = _tuner("optimize", str(space), "--trials", "2", "--seed", "3", cwd=tmp_path, timeout=3000)
    assert "req/s goodput" in done.stdout + done.stderr
    trials = _trials(tmp_path)
    baseline = trials[0]
    assert baseline.state == TrialState.COMPLETE and baseline.user_attrs["is_baseline"]
    for trial in trials:
        if trial.state == TrialState.FAIL:
            raise AssertionError(f"trial {trial.number} failed: {trial.user_attrs.get('failure_detail')}")
        levels = trial.user_attrs["levels"]
        assert 1 <= len(levels) <= 3
        for level in levels:
            assert level["request_rate"] > 0 and level["achieved_request_rate"] > 0
            assert level["meets_slo"] == (level["slo_miss"] is None)
        met = [lv["request_rate"] for lv in levels if lv["meets_slo"]]
        if trial.state == TrialState.COMPLETE:
            assert trial.value == (max(met) if met else 0.0) == trial.user_attrs["goodput_rps"]
        else:  # PRUNED by the baseline rule: its first level missed the baseline's goodput less 10%
            assert "goodput below" in trial.user_attrs["pruned_reason"]
            assert levels[0]["request_rate"] == pytest.approx(0.9 * baseline.value)
    print("goodput req/s:", [(t.number, t.state.name, t.value) for t in trials])
