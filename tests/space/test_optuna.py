"""The Optuna mapping: suggest() on real studies, the way back from trial.params, enqueueing."""

from __future__ import annotations

import copy
import pickle

import optuna
import pytest

from tests.support.space import GLM5, small_space
from tuner.errors import ConfigError
from tuner.space import Config, load_space

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(scope="module")
def glm5():
    return load_space(GLM5)


def _expected_active(config: Config) -> set[str]:
    """The parameters glm5.yaml's conditions make active for these values."""
    conditional = {"autotune_gate", "force_allreduce_fusion", "cuda_graph_max_bs", "dp_size",
                   "two_batch_overlap", "speculative_num_steps", "speculative_eagle_topk",
                   "speculative_num_draft_tokens"}
    active = set(config) - conditional
    if config["dp_attention"] is True:
        active.add("dp_size")
    if config["moe_a2a_backend"] == "deepep":
        active.add("two_batch_overlap")
    if config["speculative_algorithm"] == "NEXTN":
        active |= {"speculative_num_steps", "speculative_eagle_topk"}
        if config["speculative_eagle_topk"] > 1:
            active.add("speculative_num_draft_tokens")
    if config["moe_runner_backend"] == "flashinfer_cutlass":
        active.add("autotune_gate")
    if config["allreduce_fusion"] is True:
        active.add("force_allreduce_fusion")
    if config["cuda_graph"] is True:
        active.add("cuda_graph_max_bs")
    return active


def test_suggest_gives_only_valid_active_sets(glm5):
    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.RandomSampler(seed=3))
    seen_unset, seen_gate, seen_values = set(), 0, set()
    for _ in range(300):
        trial = study.ask()
        config = glm5.suggest(trial)
        assert set(config) == _expected_active(config)
        assert glm5.config(config) == config            # every value allowed, nothing missing
        assert 64 <= (config["max_running_requests"] or 64) <= 2048
        fraction = config["mem_fraction_static"]
        assert 0.85 <= fraction <= 0.96 and round(fraction, 2) == fraction
        seen_unset |= {name for name, value in config.items() if value is None}
        seen_gate += "autotune_gate" in config
        seen_values.add(config.key())
        study.tell(trial, 1.0)
    assert seen_unset == {"max_running_requests", "chunked_prefill_size",
                          "schedule_conservativeness", "kv_cache_dtype", "cuda_graph_max_bs",
                          "ep_size", "moe_a2a_backend", "speculative_algorithm"}
    assert 30 < seen_gate < 150
    assert len(seen_values) > 290


def test_tpe_suggestions_round_trip_through_trial_params(glm5):
    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.TPESampler(seed=5, n_startup_trials=5))
    asked = {}
    for number in range(25):
        trial = study.ask()
        config = glm5.suggest(trial)
        assert glm5.config_from_params(trial.params) == config
        asked[trial.number] = config.key()
        study.tell(trial, float(number % 7))
    for frozen in study.trials:
        assert glm5.config_from_params(frozen.params).key() == asked[frozen.number]


def test_baseline_enqueued_is_suggested_first(glm5):
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial(glm5.params_for_enqueue(glm5.baseline))
    trial = study.ask()
    assert glm5.suggest(trial) == glm5.baseline
    assert glm5.suggest(trial).key() == glm5.baseline.key()


def test_any_configuration_can_be_enqueued(glm5):
    n_on = glm5.config({**glm5.baseline, "moe_runner_backend": "flashinfer_cutlass",
                        "autotune_gate": True, "max_running_requests": None})
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial(glm5.params_for_enqueue(n_on))
    assert glm5.suggest(study.ask()) == n_on


def test_configurations_survive_sqlite_storage(glm5, tmp_path):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    study = optuna.create_study(storage=storage, study_name="s", direction="maximize",
                                sampler=optuna.samplers.RandomSampler(seed=9))
    keys = {}
    for _ in range(6):
        trial = study.ask()
        config = glm5.suggest(trial)
        keys[trial.number] = config.key()
        study.tell(trial, 1.0)
    reloaded = optuna.load_study(study_name="s", storage=storage)
    for frozen in reloaded.trials:
        assert glm5.config_from_params(frozen.params).key() == keys[frozen.number]


def test_unset_and_step_encodings(write_space):
    data = small_space({
        "running": {"kind": "int", "flag": "--max-running-requests", "low": 64, "high": 2048,
                    "log": True, "unset": True},
        "chunk": {"kind": "int", "flag": "--chunk", "low": 1024, "high": 8192, "step": 1024},
        "ratio": {"kind": "float", "flag": "--ratio", "low": 0.1, "high": 0.5, "step": 0.1},
        "scale": {"kind": "float", "flag": "--scale", "low": 1e-3, "high": 1.0, "log": True,
                  "unset": True},
        "size": {"kind": "categorical", "flag": "--size", "choices": [4096, -1], "unset": True},
    }, {"running": None, "chunk": 1024, "ratio": 0.3, "scale": 0.5, "size": None})
    space = load_space(write_space(data))
    assert space.params_for_enqueue(space.baseline) == {
        "running is set": False, "chunk": 1024, "ratio": 0.3, "scale is set": True, "scale": 0.5,
        "size": None}
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(200):
        trial = study.ask()
        config = space.suggest(trial)
        assert config["chunk"] % 1024 == 0
        assert config["ratio"] in (0.1, 0.2, 0.3, 0.4, 0.5)   # rounded, not 0.30000000000000004
        assert config["running"] is None or 64 <= config["running"] <= 2048
        assert config["scale"] is None or 1e-3 <= config["scale"] <= 1.0
        assert space.config_from_params(trial.params) == config
        study.tell(trial, 0.0)
    # a study made when the yes/no was named "<name>__set" reads back the same configuration
    legacy = {"running__set": False, "chunk": 1024, "ratio": 0.3, "scale__set": True, "scale": 0.5,
              "size": None}
    assert space.config_from_params(legacy) == space.config(space.baseline)


def test_equal_configurations_share_one_key(glm5):
    a = glm5.config(dict(glm5.baseline))
    b = glm5.config(dict(reversed(list(glm5.baseline.items()))))
    assert a == b and a.key() == b.key() and hash(a) == hash(b)
    assert len({a, b}) == 1
    other = glm5.config({**glm5.baseline, "mem_fraction_static": 0.93})
    assert other != a and other.key() != a.key()
    with pytest.raises(AttributeError):
        a.x = 1
    assert pickle.loads(pickle.dumps(a)) == a and copy.deepcopy(a).key() == a.key()


def test_params_of_another_space_are_refused(glm5):
    with pytest.raises(ConfigError, match="no value for 'moe_runner_backend'"):
        glm5.config_from_params({"something_else": 1})
