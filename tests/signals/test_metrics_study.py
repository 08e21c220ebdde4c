"""An emulated study whose server hides its decode lines (``--log-level warning``) finds the
running-request cap from /metrics, and the rule's reason says so."""

from __future__ import annotations

from typing import Any

import yaml

from tests.study.conftest import GLM5, emulated_study  # noqa: F401 (the fixture)


def test_the_cap_is_found_from_metrics_when_the_log_says_nothing(emulated_study: Any) -> None:
    flags = {**yaml.safe_load(GLM5.read_text())["server"]["flags"], "--log-level": "warning",
             "--enable-metrics": True}
    study = emulated_study(server__flags=flags)
    study.optimize(3, "--strategy", "guided", timeout=240)
    trials = study.study().get_trials()
    baseline = trials[0]
    assert baseline.user_attrs["config"]["max_running_requests"] == 64
    sources = baseline.user_attrs["observation_sources"]
    assert sources["running_req_at_cap_fraction@1024"] == "metrics", sources
    assert "server-log" not in sources.values()  # no decode line, no KV line: nothing from the log
    chosen = [str(t.user_attrs.get("chosen_by", "")) for t in trials]
    rule = next((t for t, why in zip(trials, chosen) if why.startswith("rule: cap binds at 64")), None)
    assert rule is not None, f"{chosen} {baseline.user_attrs['observations']}"
    assert rule.user_attrs["chosen_by"].endswith("max_running_requests 64 -> 1024 (metrics)"), rule.user_attrs["chosen_by"]
    assert rule.user_attrs["move"]["signal"]["source"] == "metrics"
