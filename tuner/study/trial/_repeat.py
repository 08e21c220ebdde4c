"""The trial a further run of a finished trial is measured on (a re-measure, a recheck)."""

from __future__ import annotations

from typing import Any

__all__ = ["RepeatTrial"]


class RepeatTrial:
    """What :class:`tuner.study.trial.TrialRunner` stores on while running trial ``number``
    again: its attributes are kept here (a finished Optuna trial takes no more), and it is never
    pruned."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.user_attrs: dict[str, Any] = {}

    def set_user_attr(self, key: str, value: Any) -> None:
        self.user_attrs[key] = value

    def report(self, value: float, step: int) -> None:
        pass

    def should_prune(self) -> bool:
        return False
