"""Warm start from an earlier study, with two real SQLite studies: the earlier run's best stable
configurations are queued in the new study where they fit its space, best first, after the
baseline; what does not fit is left out, and mistakes are one-line errors naming what exists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState, create_trial

from tuner.errors import ConfigError
from tuner.space import load_space
from tuner.study.record import WARM_START_FROM
from tuner.study.loop import (
    ensure_baseline_queued,
    warm_start,
    warm_start_candidates,
)

REPO = Path(__file__).resolve().parents[3]
GLM5 = REPO / "search_spaces" / "glm5.yaml"

# The earlier study's winner (K2-Thinking-like run): it had a flag the GLM-5 space lacks, and no
# kv_cache_dtype dimension.
WINNER = {
    "moe_runner_backend": "flashinfer_cutlass",
    "autotune_gate": True,
    "cuda_graph": True,
    "cuda_graph_max_bs": None,
    "max_running_requests": None,
    "attention_backend": "flashinfer",
    "allreduce_fusion": False,
    "mem_fraction_static": 0.93,
    "chunked_prefill_size": 16384,
    "schedule_conservativeness": 0.8,
    "radix_cache": False,
    "enable_dp_attention": True,
}


@pytest.fixture(scope="module")
def space() -> Any:
    return load_space(GLM5)


def _trial(
    config: dict[str, Any],
    value: float | None,
    state: TrialState = TrialState.COMPLETE,
    stable: bool = True,
) -> optuna.trial.FrozenTrial:
    return create_trial(state=state, value=value, user_attrs={"config": config, "stable": stable})


@pytest.fixture
def earlier(tmp_path: Path, space: Any) -> Path:
    """``old.db`` with two studies: ``k2`` (winners, misfits, unstable, failed) and ``k2-b``."""
    path = tmp_path / "old.db"
    url = f"sqlite:///{path}"
    k2 = optuna.create_study(storage=url, study_name="k2", direction="maximize")
    k2.add_trial(_trial(WINNER, 3000.0))
    k2.add_trial(_trial({**WINNER, "mem_fraction_static": 0.97}, 2950.0))  # outside 0.85..0.96
    k2.add_trial(_trial({**WINNER, "attention_backend": "flashmla"}, 2900.0))  # not a choice
    k2.add_trial(_trial({**WINNER, "schedule_conservativeness": 0.5}, 3100.0, stable=False))
    k2.add_trial(_trial({**WINNER, "chunked_prefill_size": 2048}, None, TrialState.FAIL))
    k2.add_trial(_trial(dict(space.baseline), 900.0))  # the new baseline: runs anyway
    other = optuna.create_study(storage=url, study_name="k2-b", direction="maximize")
    other.add_trial(_trial({**WINNER, "max_running_requests": 1024, "cuda_graph": False}, 2000.0))
    return path


def _new_study(tmp_path: Path) -> optuna.Study:
    return optuna.create_study(
        storage=f"sqlite:///{tmp_path / 'new.db'}", study_name="glm5", direction="maximize"
    )


def test_best_stable_configurations_that_fit_are_queued_after_the_baseline(
    tmp_path: Path, earlier: Path, space: Any
) -> None:
    study = _new_study(tmp_path)
    queued = warm_start(study, space, str(earlier), top=5)

    fitted_winner = {
        **{k: v for k, v in WINNER.items() if k != "enable_dp_attention"},
        "kv_cache_dtype": None,
        # the parallel and speculative dimensions the earlier study did not have: the baseline's
        "tp_size": 8, "dp_attention": False, "ep_size": None, "moe_a2a_backend": None,
        "speculative_algorithm": None,
    }
    second = {**fitted_winner, "max_running_requests": 1024, "cuda_graph": False}
    del second["cuda_graph_max_bs"]  # inactive with graphs off
    assert [c.to_dict() for c in queued] == [fitted_winner, second]

    # What runs next, in order: the baseline, then the earlier winners (read back by suggest).
    waiting = study.get_trials(states=(TrialState.WAITING,))
    assert len(waiting) == 3
    asked = [study.ask() for _ in waiting]
    assert [dict(space.suggest(t)) for t in asked] == [dict(space.baseline), fitted_winner, second]
    assert [t.user_attrs.get(WARM_START_FROM) for t in asked] == [None, "k2#0", "k2-b#0"]
    assert all(t.user_attrs.get("enqueued") for t in asked[1:])


def test_misfits_say_why(earlier: Path, space: Any) -> None:
    candidates = {c.source: c for c in warm_start_candidates(space, str(earlier))}
    assert set(candidates) == {"k2#0", "k2#1", "k2#2", "k2#5", "k2-b#0"}  # stable ones only
    assert candidates["k2#1"].config is None and "0.97 is outside" in candidates["k2#1"].reason
    assert candidates["k2#2"].config is None and "flashmla" in candidates["k2#2"].reason


def test_top_and_repeats(tmp_path: Path, earlier: Path, space: Any) -> None:
    study = _new_study(tmp_path)
    ensure_baseline_queued(study, space)
    assert len(warm_start(study, space, str(earlier), top=1)) == 1
    again = warm_start(study, space, f"sqlite:///{earlier}", top=5)
    assert len(again) == 1 and again[0]["max_running_requests"] == 1024  # the winner is queued
    assert warm_start(study, space, str(earlier), top=5) == []
    assert len(study.get_trials(states=(TrialState.WAITING,))) == 3  # one baseline, no repeats


def test_only_the_named_study(tmp_path: Path, earlier: Path, space: Any) -> None:
    queued = warm_start(_new_study(tmp_path), space, str(earlier), study_name="k2-b")
    assert [c["max_running_requests"] for c in queued] == [1024]


def test_mistakes_are_one_line_errors_naming_what_exists(
    tmp_path: Path, earlier: Path, space: Any
) -> None:
    study = _new_study(tmp_path)
    with pytest.raises(ConfigError, match=r"missing\.db: no such study database") as missing:
        warm_start(study, space, str(tmp_path / "missing.db"))
    with pytest.raises(ConfigError, match=r"no study named 'k3'; existing: k2, k2-b") as unknown:
        warm_start(study, space, str(earlier), study_name="k3")
    empty = tmp_path / "empty.db"
    optuna.create_study(storage=f"sqlite:///{empty}", study_name="fresh").add_trial(
        _trial(WINNER, None, TrialState.FAIL)
    )
    with pytest.raises(
        ConfigError, match=r"no stable completed trial.*studies there: fresh \(1 trials\)"
    ) as none:
        warm_start(study, space, str(empty))
    for error in (missing, unknown, none):
        assert "\n" not in str(error.value) and "fix:" in str(error.value)
    assert study.get_trials() == []  # nothing queued by a mistake
