"""`objective.metric: goodput`: the bounded rate search, the verdict of a level, and the schema."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tuner.errors import ConfigError
from tuner.space import load_space
from tuner.study.goodput import RateSearch, level_verdict

GLM5 = Path(__file__).resolve().parents[2] / "search_spaces" / "glm5.yaml"


def _search(capacity: float, **options: float) -> RateSearch:
    """Run the search against a server that meets the SLO up to ``capacity`` req/s."""
    settings = {"start_rate": 1.0, "max_rate": 256.0, "max_levels": 6, "resolution": 0.1, **options}
    search = RateSearch(**settings)  # type: ignore[arg-type]
    while (rate := search.next()) is not None:
        search.record(rate, rate <= capacity)
    return search


@pytest.mark.parametrize("capacity", [0.3, 1.0, 5.0, 11.0, 37.0, 300.0])
def test_the_search_stays_within_its_levels_and_brackets_the_capacity(capacity: float) -> None:
    search = _search(capacity)
    assert len(search.tried) <= 6
    assert search.goodput <= capacity  # never a rate that was missed
    if capacity < 40:
        assert search.goodput >= capacity / 2  # doubling (or halving) then bisecting
    else:  # 6 levels from 1 req/s reach 32: the bound is the budget of levels
        assert search.tried == [1, 2, 4, 8, 16, 32] and search.goodput == 32


def test_the_search_stops_at_max_rate() -> None:
    assert _search(1000.0, max_rate=10.0).tried == [1, 2, 4, 8, 10]


def test_more_levels_buy_a_closer_answer() -> None:
    assert _search(37.0, max_levels=10).goodput > _search(37.0, max_levels=6).goodput >= 32


def test_the_baseline_rule_starts_at_the_floor_and_one_miss_ends_it() -> None:
    slow = _search(3.0, floor=9.0)
    assert slow.tried == [9.0] and slow.goodput == 0.0  # one level, then pruned by the runner
    fast = _search(40.0, floor=9.0)
    assert fast.tried[0] == 9.0 and fast.goodput >= 36


def _level(**changes: object) -> dict:
    level = {"completed": 100, "failed": 0, "stop_reason": None, "p99_ttft_ms": 400.0,
             "median_tpot_ms": 30.0, "p99_tpot_ms": 60.0, "request_rate": 4.0,
             "achieved_request_rate": 3.9}
    return {**level, **changes}


def _objective(**slo: float):  # noqa: ANN202
    document = yaml.safe_load(GLM5.read_text())
    document["objective"] = {"metric": "goodput", "slo": slo}
    return document


def test_a_level_meets_its_rate_only_within_every_limit(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(_objective(p99_ttft_ms=500, p99_tpot_ms=50), sort_keys=False))
    objective = load_space(path).objective
    assert level_verdict(_level(p99_tpot_ms=45.0), objective) is None
    assert level_verdict(_level(), objective) == "p99_tpot_ms 60 > 50"
    assert level_verdict(_level(p99_ttft_ms=900.0, p99_tpot_ms=1.0), objective) == "p99_ttft_ms 900 > 500"
    assert "sent 2.00 req/s of 4 asked" == level_verdict(
        _level(p99_tpot_ms=1.0, achieved_request_rate=2.0), objective)
    assert "failed" in level_verdict(_level(p99_tpot_ms=1.0, failed=10), objective)
    assert level_verdict(_level(stop_reason="time limit"), objective) == "stopped: time limit"


def test_goodput_without_an_slo_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(_objective(), sort_keys=False))
    with pytest.raises(ConfigError, match=r"objective\.slo: goodput needs an SLO; fix: set objective"):
        load_space(path)


def test_new_fields_at_their_defaults_keep_old_studies_resumable(tmp_path: Path) -> None:
    before = load_space(GLM5).fingerprint()
    document = yaml.safe_load(GLM5.read_text())
    document["workload"]["arrival"] = "poisson"  # the default, written out
    path = tmp_path / "glm5.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    assert load_space(path).fingerprint() == before
    document["workload"]["dataset"] = {"kind": "random", "range_ratio": 0.5}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    assert load_space(path).fingerprint() != before
