"""Conditions and constraints: every operator, unset values, inactive parameters."""

from __future__ import annotations

from itertools import pairwise

import pytest

from tests.support.space import small_space
from tuner.errors import ConfigError
from tuner.space import Violation, load_space
from tuner.space._conditions import parse_condition


@pytest.mark.parametrize("when, values, holds", [
    ({"a": "x"}, {"a": "x"}, True),
    ({"a": "x"}, {"a": "y"}, False),
    ({"a": ["x", "y"]}, {"a": "y"}, True),
    ({"a": {"ne": "x"}}, {"a": "y"}, True),
    ({"a": {"not_in": ["x", "y"]}}, {"a": "y"}, False),
    ({"a": {"ge": 0.9, "lt": 0.96}}, {"a": 0.95}, True),
    ({"a": {"ge": 0.9, "lt": 0.96}}, {"a": 0.96}, False),
    ({"a": {"gt": 1}, "b": True}, {"a": 2, "b": True}, True),
    ({"a": {"gt": 1}, "b": True}, {"a": 2, "b": False}, False),
    ({"a": None}, {"a": None}, True),                 # null = unset
    ({"a": {"gt": 1}}, {"a": None}, False),           # unset is not a number
    ({"a": 1}, {"a": True}, False),                   # true is not 1
    ({"a": True}, {"a": 1}, False),
    ({"a": "x"}, {}, False),                          # inactive: never holds
    ({"a": {"ne": "x"}}, {}, False),
])
def test_operators(when, values, holds):
    assert parse_condition(when).holds(values) is holds


@pytest.fixture
def space(write_space):
    parameters = {
        "backend": {"kind": "categorical", "flag": "--backend", "choices": ["a", "b", "c"]},
        "tuned": {"kind": "store_true", "flag": "--tuned", "when": {"backend": ["b", "c"]}},
        "depth": {"kind": "int", "flag": "--depth", "low": 1, "high": 9, "unset": True,
                  "when": {"backend": {"ne": "a"}, "tuned": True}},
        "fraction": {"kind": "float", "flag": "--fraction", "low": 0.8, "high": 0.99,
                     "step": 0.01},
    }
    constraints = [
        {"when": {"fraction": {"ge": 0.96}}, "action": "skip", "reason": "too much memory"},
        {"when": {"depth": {"gt": 5}, "backend": "c"}, "action": "warn", "reason": "deep on c"},
        {"when": {"depth": None}, "action": "warn", "reason": "depth left to the server"},
    ]
    return load_space(write_space(small_space(parameters, {"backend": "a", "fraction": 0.9},
                                              constraints=constraints)))


def test_chained_conditions_decide_what_is_active(space):
    assert list(space.baseline) == ["backend", "fraction"]
    config = space.config({"backend": "b", "tuned": False, "fraction": 0.9})
    assert "depth" not in config                      # needs tuned: true
    config = space.config({"backend": "c", "tuned": True, "depth": 7, "fraction": 0.9})
    assert config["depth"] == 7
    assert ("--depth", "7") in pairwise(space.render(config).argv)


def test_constraints_skip_and_warn(space):
    assert space.constraint_violations(space.baseline) == []
    hot = space.config({"backend": "a", "fraction": 0.97})
    assert space.constraint_violations(hot) == [Violation("too much memory", "skip")]
    deep = space.config({"backend": "c", "tuned": True, "depth": 7, "fraction": 0.97})
    assert space.constraint_violations(deep) == [Violation("too much memory", "skip"),
                                                 Violation("deep on c", "warn")]
    assert space.render(deep).warnings == ["deep on c"]
    unset = space.config({"backend": "b", "tuned": True, "depth": None, "fraction": 0.9})
    assert space.constraint_violations(unset) == [Violation("depth left to the server", "warn")]
    shallow_b = space.config({"backend": "b", "tuned": True, "depth": 7, "fraction": 0.9})
    assert space.constraint_violations(shallow_b) == []   # depth > 5 but not on c


def test_constraint_on_an_inactive_parameter_does_not_hold(space):
    config = space.config({"backend": "a", "fraction": 0.9})
    assert "depth" not in config
    assert space.constraint_violations(config) == []     # `depth: null` needs depth active


def test_baseline_is_exempt_only_by_the_caller(write_space):
    parameters = {"fraction": {"kind": "float", "flag": "--fraction", "low": 0.8, "high": 0.99,
                               "step": 0.01}}
    constraints = [{"when": {"fraction": {"ge": 0.96}}, "reason": "OOM at start"}]
    space = load_space(write_space(small_space(parameters, {"fraction": 0.97},
                                               constraints=constraints)))
    assert space.is_baseline(space.baseline)
    assert space.constraint_violations(space.baseline) == [Violation("OOM at start", "skip")]


def test_values_made_inactive_can_be_dropped(space):
    deep = {"backend": "c", "tuned": True, "depth": 7, "fraction": 0.9}
    with pytest.raises(ConfigError, match=r"config\.tuned: is inactive here"):
        space.config({**deep, "backend": "a"})
    assert space.config({**deep, "backend": "a"}, drop_inactive=True) == space.baseline
