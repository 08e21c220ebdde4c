"""optuna-dashboard shows what the tuner stored: study attributes, failure reasons, level figures.

Read through the dashboard's own HTTP API, as its web page reads it.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.dashboard import check_dashboard_shows_study


def test_dashboard_api_shows_the_synthetic_study(synthetic, tmp_path: Path) -> None:
    check_dashboard_shows_study(synthetic.url, synthetic.name, tmp_path / "dashboard.log")
