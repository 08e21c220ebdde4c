"""Pure logic of the search: the one attribute schema (typed outcomes), the study view, the
strategies' proposals, TPE learning from crashes, the gate testing itself, log observations.

Studies here are real in-memory Optuna studies with trials written as the optimize loop writes
them (no host: these are the parts that decide, not the parts that measure)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from tuner.engines import load_profile
from tuner.errors import ConfigError
from tuner.signals import LogObserver, Source, level_observations
from tuner.loadgen import LevelMetrics
from tuner.space import load_space
from tuner.errors import ServerFailure
from tuner.study.record import (
    CONFIG,
    CONFIG_KEY,
    FAILURE_EXCERPT,
    FAILURE_REASON,
    PRUNED_REASON,
    REUSED_FROM,
    Outcome,
    TrialOutcome,
    outcome_of,
    read_view,
    write_outcome,
)
from tuner.study.trial import FeasibilityCheck
from tuner.study.strategies import DEFAULT_STRATEGY, make_strategy, resolve_strategy
from tuner.study.strategies.one_at_a_time import single_changes
from tuner.study.strategies.tpe import CrashAwareTPESampler

GLM5 = Path(__file__).resolve().parents[3] / "search_spaces" / "glm5.yaml"
optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(scope="module")
def space() -> Any:
    return load_space(GLM5)


def _level(c: int, tps: float, failed: int = 0, stop: str | None = None) -> dict[str, Any]:
    """A level as the trial runner stores it (``LevelMetrics.to_dict``)."""
    return LevelMetrics(concurrency=c, num_requests=100 + failed, completed=100, failed=failed, duration_s=10.0,
                        input_tokens=0, output_tokens=int(10 * tps), output_throughput=tps, total_throughput=tps,
                        request_throughput=10.0, stop_reason=stop).to_dict()


def _add(study: optuna.Study, space: Any, config: dict[str, Any], state: TrialState, value: float | None = None,
         **user_attrs: Any) -> None:
    full = space.config({**dict(space.baseline), **config}, drop_inactive=True)
    study.add_trial(create_trial(
        state=state,
        value=value if state == TrialState.COMPLETE else None,
        params=space.params_for_enqueue(full),
        distributions=_distributions(study, space, full),
        user_attrs={CONFIG: dict(full), CONFIG_KEY: full.key(), **user_attrs},
    ))


def _distributions(study: optuna.Study, space: Any, config: Any) -> dict[str, Any]:
    probe = optuna.create_study()
    probe.enqueue_trial(space.params_for_enqueue(config))
    trial = probe.ask()
    space.suggest(trial)
    return dict(trial.distributions)


# -- the schema: one reading of PRUNED and FAIL ---------------------------------------------------

@pytest.mark.parametrize("state, ua, outcome", [
    (TrialState.COMPLETE, {}, Outcome.COMPLETE),
    (TrialState.PRUNED, {"pruned_by": "baseline"}, Outcome.BELOW_BASELINE),
    (TrialState.PRUNED, {}, Outcome.BELOW_BASELINE),  # studies from before pruned_by
    (TrialState.PRUNED, {"pruned_by": "constraint"}, Outcome.CONSTRAINT),
    (TrialState.PRUNED, {"pruned_by": "feasibility"}, Outcome.GATED),
    (TrialState.FAIL, {"failure_reason": "oom-at-start"}, Outcome.FAILED),
    (TrialState.FAIL, {"failure_reason": "unstable-at-1024"}, Outcome.FAILED),
    (TrialState.FAIL, {"failure_reason": "interrupted"}, Outcome.RUN_FAILED),
    (TrialState.FAIL, {"failure_reason": "worker-died"}, Outcome.RUN_FAILED),
    (TrialState.COMPLETE, {"reused_from": 3}, Outcome.REUSED),
])
def test_outcome_of_reads_each_stored_meaning(state, ua, outcome) -> None:
    trial = create_trial(state=state, value=1.0 if state == TrialState.COMPLETE else None, user_attrs=ua)
    assert outcome_of(trial) == outcome


def test_a_pruned_outcome_round_trips_through_the_stored_attributes() -> None:
    study = optuna.create_study()
    for outcome in (Outcome.BELOW_BASELINE, Outcome.CONSTRAINT, Outcome.GATED):
        write_outcome(study, study.ask(), TrialOutcome.pruned(outcome, "why"))
    assert [outcome_of(t) for t in study.trials] == [Outcome.BELOW_BASELINE, Outcome.CONSTRAINT, Outcome.GATED]
    assert {t.user_attrs[PRUNED_REASON] for t in study.trials} == {"why"}
    with pytest.raises(ValueError):
        TrialOutcome.pruned(Outcome.FAILED, "not a PRUNED meaning")


def test_every_outcome_written_by_the_one_writer_reads_back_as_its_class() -> None:
    """Each value the trial code returns is written in Optuna's terms and read back as its class:
    a server failure of the configuration, one of the run, a completed trial, and a trial that
    copies each of them."""
    study = optuna.create_study(direction="maximize")
    results = [
        TrialOutcome.complete([812.0]),
        TrialOutcome.server_failed(ServerFailure("oom-at-start", "CUDA out of memory", "log tail")),
        TrialOutcome.run_failed("host-error", "ssh: connection reset"),
        TrialOutcome.pruned(Outcome.BELOW_BASELINE, "below the baseline"),
    ]
    for result in results:
        trial = study.ask()
        if result.outcome == Outcome.BELOW_BASELINE:
            trial.report(300.0, 1024)
        write_outcome(study, trial, result)
    written = study.get_trials()
    assert [t.state for t in written] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.FAIL, TrialState.PRUNED]
    assert [outcome_of(t) for t in written] == [Outcome.COMPLETE, Outcome.FAILED, Outcome.RUN_FAILED, Outcome.BELOW_BASELINE]
    assert written[1].user_attrs[FAILURE_EXCERPT] == "log tail"
    assert written[2].user_attrs[FAILURE_REASON] == "host-error" and FAILURE_EXCERPT not in written[2].user_attrs
    for earlier in list(written):
        write_outcome(study, study.ask(), TrialOutcome.reused(earlier))
    copies = study.get_trials()[len(written):]
    assert [t.state for t in copies] == [t.state for t in written]
    assert [t.user_attrs[REUSED_FROM] for t in copies] == [t.number for t in written]
    assert [outcome_of(t) for t in copies] == [Outcome.REUSED] * 4
    assert [outcome_of(t, follow_reuse=True) for t in copies] == [outcome_of(t) for t in written]
    assert copies[0].values == [812.0] and copies[3].intermediate_values == {1024: 300.0}


# -- the view ---------------------------------------------------------------------------------------

def test_view_reads_levels_outcomes_and_reasons_once(space) -> None:
    study = optuna.create_study(direction="maximize")
    base_levels = [_level(64, 300.0), _level(256, 320.0), _level(1024, 310.0)]
    _add(study, space, {}, TrialState.COMPLETE, 320.0, is_baseline=True, levels=base_levels,
         chosen_by="baseline", observations={"kv_tokens": 495488, "running_req_at_cap_fraction": 0.93})
    _add(study, space, {"moe_runner_backend": "flashinfer_cutlass", "autotune_gate": True}, TrialState.COMPLETE, 800.0,
         levels=[_level(64, 250.0), _level(256, 800.0), _level(1024, 700.0, failed=50)], chosen_by="sampler: tpe")
    _add(study, space, {"attention_backend": "fa3"}, TrialState.FAIL, failure_reason="wrong-output")
    _add(study, space, {"mem_fraction_static": 0.96}, TrialState.PRUNED, pruned_by="constraint")
    view = read_view(study, space)
    assert [r.outcome for r in view.records] == [Outcome.COMPLETE, Outcome.COMPLETE, Outcome.FAILED, Outcome.CONSTRAINT]
    assert view.baseline is not None and view.baseline.number == 0
    assert view.baseline.observations == {"kv_tokens": 495488.0, "running_req_at_cap_fraction": 0.93}
    # Only clean levels: 1024 lost 50 of 150 requests.
    assert view.records[1].clean == {64: 250.0, 256: 800.0}
    assert view.best().number == 1 and view.records[1].chosen_by == "sampler: tpe"
    assert [r.number for r in view.failed()] == [2] and view.failed()[0].failure_reason == "wrong-output"
    assert set(view.finished_by_key()) == {view.records[i].config_key for i in (0, 1, 2)}


# -- strategies --------------------------------------------------------------------------------------

def test_unknown_strategy_is_one_line_naming_the_choices(space) -> None:
    with pytest.raises(ConfigError, match=r"^--strategy annealing: unknown; fix: use one of guided, tpe, random, one-at-a-time$"):
        make_strategy("annealing", space, 0)
    with pytest.raises(ConfigError, match="--sampler"):
        resolve_strategy(None, "annealing", space, 0)


def test_the_older_sampler_option_maps_to_a_strategy_or_a_sampler(space) -> None:
    assert resolve_strategy(None, "tpe", space, 0).name == "tpe"
    assert resolve_strategy(None, "random", space, 0).name == "random"
    qmc = resolve_strategy(None, "qmc", space, 0)  # gp would need the optional torch
    assert isinstance(qmc.sampler(), optuna.samplers.QMCSampler) and qmc.sampled_reason == "sampler: qmc"
    assert resolve_strategy(None, None, space, 0).name == DEFAULT_STRATEGY == "guided"  # neither option


def test_one_at_a_time_changes_one_parameter_of_the_best_and_skips_tried_ones(space) -> None:
    strategy = make_strategy("one-at-a-time", space, 0)
    study = optuna.create_study(direction="maximize")
    _add(study, space, {}, TrialState.COMPLETE, 300.0, is_baseline=True, levels=[_level(64, 300.0)])
    first = strategy.propose(read_view(study, space))
    assert first is not None and first.reason == "one-at-a-time: moe_runner_backend=auto from trial 0"
    assert _changed(space, first.config) == {"moe_runner_backend": "auto"}
    _add(study, space, first.config, TrialState.FAIL, failure_reason="startup-crash")
    second = strategy.propose(read_view(study, space))
    assert _changed(space, second.config) == {"moe_runner_backend": "triton"}
    # A better trial becomes the starting point.
    _add(study, space, {"moe_runner_backend": "triton"}, TrialState.COMPLETE, 500.0, levels=[_level(64, 500.0)])
    third = strategy.propose(read_view(study, space))
    assert third.reason.endswith("from trial 2")
    best = study.trials[2].user_attrs["config"]
    assert _changed(space, third.config, best) == {"moe_runner_backend": "flashinfer_cutlass", "autotune_gate": False}


def _changed(space: Any, config: dict[str, Any], start: dict[str, Any] | None = None) -> dict[str, Any]:
    base = dict(start or space.baseline)
    return {k: v for k, v in config.items() if base.get(k, "absent") != v}


def test_single_changes_activate_dependent_parameters_with_a_valid_value(space) -> None:
    changes = {(name, value): config for name, value, config in single_changes(space, dict(space.baseline))}
    cutlass = changes[("moe_runner_backend", "flashinfer_cutlass")]
    assert cutlass["autotune_gate"] in (False, True)  # activated by the change, so it has a value
    assert all(space.config(c).key() != space.baseline.key() for c in changes.values())
    mem = sorted(v for (n, v) in changes if n == "mem_fraction_static")
    assert mem[0] == 0.85 and mem[-1] == 0.96


# -- crashes teach TPE; the gate tests itself --------------------------------------------------------

def test_crash_aware_tpe_avoids_what_crashed_while_plain_tpe_cannot_see_it() -> None:
    dist = {"x": FloatDistribution(0.0, 1.0), "backend": CategoricalDistribution(["a", "b"])}

    def sampled(sampler: optuna.samplers.BaseSampler) -> list[str]:
        study = optuna.create_study(direction="maximize", sampler=sampler)
        for i in range(12):  # every "b" crashed; "a" ran, better with larger x
            backend = "b" if i % 2 else "a"
            x = i / 12
            study.add_trial(create_trial(
                state=TrialState.FAIL if backend == "b" else TrialState.COMPLETE,
                value=None if backend == "b" else x, params={"x": x, "backend": backend}, distributions=dist,
                user_attrs={"failure_reason": "startup-crash"} if backend == "b" else {}))
        chosen = []
        for _ in range(20):
            trial = study.ask(dist)
            chosen.append(trial.params["backend"])
            study.tell(trial, state=TrialState.FAIL)  # leave the history as it is
        return chosen

    settings = {"seed": 1, "multivariate": True, "n_startup_trials": 6}
    aware = sampled(CrashAwareTPESampler(**settings))
    plain = sampled(optuna.samplers.TPESampler(**settings))
    assert aware.count("b") < plain.count("b"), (aware, plain)
    assert aware.count("b") <= 4


def test_gate_lets_some_doubted_configurations_run_and_says_so(space) -> None:
    study = optuna.create_study(direction="maximize")
    for i in range(3):
        _add(study, space, {"attention_backend": "fa3", "mem_fraction_static": 0.86 + i / 100},
             TrialState.FAIL, failure_reason="wrong-output")
    _add(study, space, {}, TrialState.COMPLETE, 300.0, levels=[_level(64, 300.0)])
    fa3 = space.config({**dict(space.baseline), "attention_backend": "fa3", "mem_fraction_static": 0.9})
    strict = FeasibilityCheck.from_study(study, space)
    exploring = FeasibilityCheck.from_study(study, space, explore=0.5, seed=0)
    strict_runs = [strict.decide(fa3).skip is None for _ in range(9)]
    decisions = [exploring.decide(fa3) for _ in range(9)]
    assert sum(strict_runs) <= 1  # only the stall guard lets one through
    ran = [d for d in decisions if d.skip is None]
    assert 2 <= len(ran) <= 8
    assert all(d.note.startswith("gate let it run to test itself (feasibility: p_fail=") for d in ran)


# -- observations from the server log -----------------------------------------------------------------

def test_sglang_log_lines_become_level_observations() -> None:
    profile = load_profile("sglang")
    observer = LogObserver(profile.log_observations)
    observer.feed("[TP0] KV Cache is allocated. #tokens: 495488, KV size: 30.12 GB", "starting")
    observer.feed("[TP0] Capture cuda graph bs [1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64]", "starting")
    queue = [0, 10, 20, 60, 120, 200]
    for i, queued in enumerate(queue):
        running = 64 if i else 40
        observer.feed(f"[TP0] Decode batch, #running-req: {running}, #token: 9000, token usage: 0.{i + 1}0, "
                      f"cuda graph: {i < 5}, gen throughput (token/s): 300.00, #queue-req: {queued}, ", "level-256")
    observer.feed("[TP0] Prefill batch, #new-seq: 5, #new-token: 800, #cached-token: 0, token usage: 0.99, "
                  "#running-req: 3, #queue-req: 0, ", "level-256")
    found = level_observations({Source.SERVER_LOG: observer}, "level-256", 256, cap=64,
                               gpu={"mean_power_w": 250.0, "power_limit_w": 600.0})
    seen = found.values
    assert found.sources == {name: Source.TELEMETRY if name.startswith("gpu_") else Source.SERVER_LOG for name in seen}
    assert seen == {"kv_tokens": 495488.0, "graph_max_bs": 64.0, "running_req_max": 64.0, "running_req_at_cap_fraction": 0.833,
                    "eager_fraction": 0.167,  # one decode line of six above the captured graphs
                    "queue_req_max": 200.0, "queue_growing": 1.0, "token_usage_max": 0.6,
                    "gpu_power_w": 250.0, "gpu_power_limit_w": 600.0}
    assert profile.running_cap(["x", "--max-running-requests", "64"]) == 64
    assert profile.running_cap(["x"]) is None


def test_vllm_log_lines_become_level_observations() -> None:
    profile = load_profile("vllm")
    observer = LogObserver(profile.log_observations)
    observer.feed("(EngineCore pid=1) INFO [kv_cache_utils.py:2328] CPU KV cache size: 174,752 tokens, "
                  "Maximum concurrency for 2,048 tokens per request: 85.33x", "starting")
    observer.feed("INFO [loggers.py:300] Engine 000: Avg prompt throughput: 10.0 tokens/s, Avg generation "
                  "throughput: 20.0 tokens/s, Running: 2 reqs, Waiting: 5 reqs, CPU KV cache usage: 0.1%", "level-8")
    seen = level_observations({Source.SERVER_LOG: observer}, "level-8", 8,
                              profile.running_cap(["--max-num-seqs", "2"])).values
    assert seen == {"kv_tokens": 174752.0, "running_req_max": 2.0, "running_req_at_cap_fraction": 1.0,
                    "queue_req_max": 5.0, "queue_growing": 0.0}
