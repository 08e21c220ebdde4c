"""The running server's side of a trial, as the study's rate search and level loops use it."""

from __future__ import annotations


class SearchSession:
    """The running server's side of a trial as the search uses it (no server crashes here)."""

    base_url = "http://127.0.0.1:1"
    phase = ""
    argv: list[str] = []

    def __init__(self) -> None:
        from tuner.signals import LogObserver

        self.observer = LogObserver({"running_req": r"Running: (\d+) reqs", "queue_req": r"Waiting: (\d+) reqs"})

    def wait_for_failure(self, seconds: float) -> None:
        return None

    def log_excerpt(self) -> str:
        return ""

