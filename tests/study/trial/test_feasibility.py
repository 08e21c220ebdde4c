"""Learning from crashes: the feasibility model on studies in real Optuna storage (SQLite), the
SCOOT threshold rule, the report of values that keep failing, and the gate in the optimize loop
on the emulated host's performance model."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from bench.search_efficiency import ModelHost, host_runs, run_loop
from tuner.space import Config, load_space
from tuner.study.trial import (
    FeasibilityCheck,
    FeasibilityGate,
    FeasibilityModel,
    failing_values,
    training_label,
)

REPO = Path(__file__).resolve().parents[3]
GLM5 = REPO / "search_spaces" / "glm5.yaml"


_HELD = ("tp_size", "dp_attention", "ep_size", "moe_a2a_backend", "speculative_algorithm")


@pytest.fixture(scope="module")
def space() -> Any:
    return load_space(GLM5)


def _random_configs(space: Any, count: int, seed: int, **fixed: Any) -> list[Config]:
    """Varied configurations of glm5.yaml (random sampler), with ``fixed`` values forced; the
    parallel and speculative dimensions stay at the baseline's, as memory stays below 0.94."""
    fixed = {**{name: space.baseline[name] for name in _HELD}, **fixed}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    configs = []
    while len(configs) < count:
        trial = study.ask()
        values = {**dict(space.baseline), **dict(space.suggest(trial)), **fixed}
        study.tell(trial, state=TrialState.PRUNED)
        config = space.config(values, drop_inactive=True)
        if config.get("mem_fraction_static", 0) < 0.94:  # keep memory out of the picture
            configs.append(config)
    return configs


def _add(study: optuna.Study, config: Config, state: TrialState, **user_attrs: Any) -> None:
    study.add_trial(
        create_trial(
            state=state,
            value=1000.0 if state == TrialState.COMPLETE else None,
            user_attrs={"config": dict(config), **user_attrs},
        )
    )


def _sqlite_study(tmp_path: Path, name: str = "crashes") -> optuna.Study:
    return optuna.create_study(
        storage=f"sqlite:///{tmp_path / 'study.db'}", study_name=name, direction="maximize"
    )


def test_a_value_that_always_fails_is_learnt(space: Any, tmp_path: Path) -> None:
    study = _sqlite_study(tmp_path)
    for config in _random_configs(space, 6, seed=1, attention_backend="fa3"):
        _add(study, config, TrialState.FAIL, failure_reason="wrong-output")
    for config in _random_configs(space, 12, seed=2, attention_backend="flashinfer"):
        _add(study, config, TrialState.COMPLETE, stable=True)
    model = FeasibilityModel.from_study(
        optuna.load_study(study_name="crashes", storage=study._storage), space
    )
    fresh_fa3 = _random_configs(space, 5, seed=3, attention_backend="fa3")
    fresh_ok = _random_configs(space, 5, seed=3, attention_backend="flashinfer")
    assert min(model.p_fail(c) for c in fresh_fa3) > 0.7
    assert max(model.p_fail(c) for c in fresh_ok) < 0.3


def test_failures_of_the_run_and_skipped_trials_teach_nothing(space: Any, tmp_path: Path) -> None:
    study = _sqlite_study(tmp_path)
    configs = _random_configs(space, 7, seed=4)
    for config, reason in zip(configs, ("worker-died", "host-error", "interrupted")):
        _add(study, config, TrialState.FAIL, failure_reason=reason)
    _add(study, configs[3], TrialState.PRUNED, pruned_by="constraint")
    _add(study, configs[4], TrialState.PRUNED, pruned_by="feasibility")
    _add(study, configs[5], TrialState.FAIL, failure_reason="startup-crash", reused_from=0)
    _add(study, configs[6], TrialState.PRUNED, pruned_by="baseline")
    labels = [training_label(t) for t in study.get_trials()]
    assert labels == [None, None, None, None, None, None, False]
    model = FeasibilityModel.from_study(study, space)
    assert model.failed == [False]
    assert all(model.p_fail(c) == 0.0 for c in configs)


def test_an_interaction_is_learnt(space: Any, tmp_path: Path) -> None:
    """Graphs off with flashinfer attention and no cap crash at 512; either alone does not."""
    study = _sqlite_study(tmp_path)
    crash = {"cuda_graph": False, "attention_backend": "flashinfer", "max_running_requests": None}
    for config in _random_configs(space, 8, seed=5, **crash):
        _add(study, config, TrialState.FAIL, failure_reason="unstable-at-512")
    for config in _random_configs(space, 8, seed=6, cuda_graph=False, attention_backend="triton"):
        _add(study, config, TrialState.COMPLETE)
    for config in _random_configs(
        space, 8, seed=7, cuda_graph=True, attention_backend="flashinfer"
    ):
        _add(study, config, TrialState.COMPLETE)
    model = FeasibilityModel.from_study(study, space)

    def fresh(**values: Any) -> list[Config]:
        return _random_configs(space, 8, seed=8, **values)

    crashing = [model.p_fail(c) for c in fresh(**crash)]
    graphs_off_triton = [
        model.p_fail(c)
        for c in fresh(cuda_graph=False, attention_backend="triton", max_running_requests=None)
    ]
    graphs_on = [
        model.p_fail(c)
        for c in fresh(cuda_graph=True, attention_backend="flashinfer", max_running_requests=None)
    ]

    def mean(values: list[float]) -> float:
        return sum(values) / len(values)

    assert mean(crashing) > 0.5  # the combination is ranked well above either half of it
    assert mean(crashing) > mean(graphs_off_triton) + 0.25
    assert mean(crashing) > mean(graphs_on) + 0.25


def test_gate_follows_the_scoot_threshold_rule() -> None:
    gate = FeasibilityGate()
    assert gate.threshold == 0.5
    assert gate.allows(0.5) and not gate.allows(0.51)
    for expected in (0.55, 0.6, 0.65, 0.7, 0.75, 0.75):
        gate.record(failed=True)
        assert gate.threshold == pytest.approx(expected)
    assert gate.allows(0.25) and not gate.allows(0.26)
    for _ in range(4):
        gate.record(failed=False)
    assert gate.threshold == pytest.approx(0.75)  # 4 successes: not yet
    gate.record(failed=False)
    assert gate.threshold == pytest.approx(0.70)
    for _ in range(5 * 20):
        gate.record(failed=False)
    assert gate.threshold == pytest.approx(0.25)  # never below min
    gate.record(failed=True)
    assert gate.threshold == pytest.approx(0.30)
    with pytest.raises(ValueError):
        FeasibilityGate(start=0.9, max=0.75)


def test_check_names_the_failed_trials_it_resembles(space: Any, tmp_path: Path) -> None:
    study = _sqlite_study(tmp_path)
    for config in _random_configs(space, 4, seed=9, attention_backend="fa3"):
        _add(study, config, TrialState.FAIL, failure_reason="wrong-output")
    for config in _random_configs(space, 8, seed=10, attention_backend="triton"):
        _add(study, config, TrialState.COMPLETE)
    check = FeasibilityCheck.from_study(study, space)
    assert check.gate.threshold == pytest.approx(0.65)  # replayed: 4 failures, then 8 successes
    candidate = _random_configs(space, 1, seed=11, attention_backend="fa3")[0]
    reason = check.skip_reason(candidate)
    match = re.fullmatch(
        r"feasibility: p_fail=(\d\.\d\d) like failed trials (\d+), (\d+)", reason or ""
    )
    assert match, reason
    assert float(match.group(1)) > 0.6
    assert {int(match.group(2)), int(match.group(3))} <= {0, 1, 2, 3}
    assert (
        check.skip_reason(_random_configs(space, 1, seed=11, attention_backend="triton")[0])
        is None
    )


def test_a_pessimistic_model_cannot_stall_the_study(space: Any, tmp_path: Path) -> None:
    study = _sqlite_study(tmp_path)
    for config in _random_configs(space, 3, seed=12, attention_backend="fa3"):
        _add(study, config, TrialState.FAIL, failure_reason="wrong-output")
    for config in _random_configs(space, 3, seed=13, attention_backend="triton"):
        _add(study, config, TrialState.COMPLETE)
    check = FeasibilityCheck.from_study(study, space)
    check.max_skips_in_a_row = 3
    fa3 = _random_configs(space, 1, seed=14, attention_backend="fa3")[0]
    assert [check.skip_reason(fa3) is None for _ in range(5)] == [False, False, False, True, False]


def test_failing_values_reports_a_value_that_keeps_failing(space: Any, tmp_path: Path) -> None:
    study = _sqlite_study(tmp_path)
    for config in _random_configs(space, 4, seed=15, attention_backend="fa3", cuda_graph=True):
        _add(study, config, TrialState.FAIL, failure_reason="wrong-output")
    crash = {"cuda_graph": False, "attention_backend": "flashinfer", "max_running_requests": None}
    # seed 19: the two crashes share no other value with the failed fa3 trials (with seed 16,
    # one had chunked_prefill_size=16384 like two fa3 failures, and that value got the blame)
    for config in _random_configs(space, 2, seed=19, **crash):
        _add(study, config, TrialState.FAIL, failure_reason="unstable-at-512")
    for config in _random_configs(space, 6, seed=17, attention_backend="triton", cuda_graph=True):
        _add(study, config, TrialState.COMPLETE)
    _add(
        study,
        _random_configs(space, 1, seed=18, attention_backend="fa3")[0],
        TrialState.FAIL,
        failure_reason="host-error",
    )  # not the configuration's fault: not counted
    found = failing_values(study)
    assert found[0] == "attention_backend=fa3: 4 of 4 trials failed (wrong-output)"
    assert not any(line.startswith("cuda_graph=false") for line in found)  # 2 failures only
    assert "cuda_graph=false: 2 of 2 trials failed (unstable-at-512)" in failing_values(
        study, min_failures=2
    )
    assert not any(
        line.startswith("attention_backend=fa3") for line in failing_values(study, min_failures=5)
    )  # 4 failures only


def _crash_count(space: Any, host: Any, seeds: range, gate: bool) -> tuple[int, list[Any]]:
    crashes, studies = 0, []
    for seed in seeds:
        study = run_loop(space, host, "tpe", seed, 30, gate)
        crashes += sum(host.outcome(c).failure is not None for c in host_runs(study))
        studies.append(study)
    return crashes, studies


def test_gate_cuts_crashing_configurations_on_the_performance_model(space: Any) -> None:
    """30-trial studies on the emulated host's model (no HTTP): the same seeds with and without
    the gate; with it, fewer configurations that crash or answer wrongly get host time."""
    host = ModelHost(space)
    seeds = range(3)
    without, _ = _crash_count(space, host, seeds, gate=False)
    with_gate, studies = _crash_count(space, host, seeds, gate=True)
    assert with_gate < 0.8 * without, (with_gate, without)
    skipped = [
        t for s in studies for t in s.trials if t.user_attrs.get("pruned_by") == "feasibility"
    ]
    assert skipped and all(
        re.fullmatch(
            r"feasibility: p_fail=\d\.\d\d like failed trials \d+(, \d+)?",
            t.user_attrs["pruned_reason"],
        )
        for t in skipped
    )
    assert not any(t.user_attrs.get("is_baseline") for t in skipped)
    assert all(len(host_runs(s)) == 30 for s in studies)  # skipped ones cost no budget
