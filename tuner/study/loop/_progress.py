"""Live progress of a study: trial i/N, phase, level k of n, best so far, host time.

On a terminal it redraws one status line under the trial log (rich); elsewhere (CI, a pipe) it
prints one plain line per event. Host time is on the real host's scale (emulated runs are
converted by their time scale and say "emulated").
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import optuna
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from tuner.study.record import changes_from
from tuner.timescale import TimeScale

if TYPE_CHECKING:
    from tuner.loadgen import LevelMetrics
    from tuner.space import Config

__all__ = ["ProgressView"]


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _hms(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class ProgressView:
    """Receives the optimize loop's events and shows them."""

    def __init__(
        self, console: Console | None = None, time_scale: TimeScale | None = None
    ) -> None:
        self.console = console or Console(stderr=True)
        self.scale = time_scale or TimeScale()
        self.total = 0
        self.index = 0
        self.best: float | None = None
        self.host_seconds = 0.0
        self.trial_number: int | None = None
        self.chosen_by = ""
        self.status = ""
        self._live: Live | None = None
        self._started = time.monotonic()
        self.goodput = False  # objective.metric goodput: values are req/s, levels are rates
        self.tokens_per_joule = False  # objective.metric tokens_per_joule: values are tok/J
        self._energy: float | None = None  # the next level's tokens per joule
        # The space's baseline: a trial's line shows what differs from it (the whole
        # configuration is in `tuner trials`, the dashboard and the trial's note).
        self.baseline: Mapping[str, Any] = {}

    # -- the loop's events --------------------------------------------------------------------

    def run_started(self, total: int, study: optuna.Study) -> None:
        self.total = total
        completed = [t.values[0] for t in study.get_trials(deepcopy=False) if t.values]
        self.best = max(completed) if completed else None
        label = " (emulated)" if self.scale.emulated else ""
        self.console.print(
            f"[bold]study {study.study_name}{label}[/]: {total} configurations to run"
        )
        if self.console.is_terminal:
            self._live = Live(Text(""), console=self.console, refresh_per_second=4, transient=True)
            self._live.start()

    def trial_started(
        self, number: int, index: int, config: Config, is_baseline: bool, chosen_by: str = ""
    ) -> None:
        self.index = index
        self.trial_number = number
        self.chosen_by = chosen_by
        label = "baseline" if is_baseline else "trial"
        flags = self.changes_text(config, is_baseline)
        why = f" [dim]chosen by {escape(chosen_by)}[/]" if chosen_by and not is_baseline else ""
        self._print(f"[cyan]{label} {number}[/] ({index}/{self.total}): {flags}{why}")
        self.phase("starting")

    def changes_text(self, config: Any, is_baseline: bool) -> str:
        """``name=value (baseline old)`` for each setting that differs from the baseline."""
        if is_baseline:
            return "the space's baseline"
        changes = changes_from(self.baseline, dict(config))
        if not changes:
            return "the baseline's configuration"
        return escape(", ".join(change.text() for change in changes))

    def value_text(self, value: float) -> str:
        """The objective's figure with its unit, as the trial's line writes it."""
        return self._value(value)

    def phase(self, text: str) -> None:
        self.status = text
        self._refresh()

    def level_energy(self, tokens_per_joule: float | None) -> None:
        """The next level's output tokens per joule (None: no GPU power sampled)."""
        self._energy = tokens_per_joule

    def level_done(self, metrics: LevelMetrics, k: int, n: int) -> None:
        emulated = " emulated" if metrics.emulated else ""
        energy, self._energy = self._energy, None
        per_joule = f", {energy:.2f} tok/J{emulated}" if energy is not None else ""
        stop = f" [red]stopped: {metrics.stop_reason}[/]" if metrics.stop_reason else ""
        bound = getattr(metrics, "measurement_bound", None)
        seen = getattr(metrics, "in_flight", None)
        seen = f", {seen:,.0f} of {metrics.concurrency} in flight" if seen is not None else ""
        stop += (
            f"\n      [yellow]client-bound{seen} (a lower bound where that moves the figure over "
            f"1%): {bound}[/]"
            if bound
            else ""
        )
        repeated = getattr(metrics, "repeated_prompts", 0)
        again = f", {repeated} prompts repeated" if repeated else ""
        self._print(
            f"    level {k}/{n} {self._at(metrics)}: {_num(metrics.output_throughput)} output tok/s"
            f"{emulated}, {metrics.completed} ok / {metrics.failed} failed{again}, "
            f"p99 TTFT {_num(metrics.p99_ttft_ms)} ms, median TPOT {_num(metrics.median_tpot_ms, 1)} ms"
            f"{per_joule}{stop}"
        )

    def trial_finished(
        self,
        number: int,
        state: str,
        value: float | None,
        reason: str | None,
        seconds: float,
        host_seconds: float | None = None,
    ) -> None:
        """``seconds``: the trial's wall time; ``host_seconds``: its host time as the trial runner
        stored it (an emulated trial: the start-up and levels the emulator stood for, plus the
        tuner's own work at its real duration), else ``seconds`` on the time scale."""
        self.host_seconds += (
            host_seconds if host_seconds is not None else self.scale.duration(seconds)
        )
        if value is not None and (self.best is None or value > self.best):
            self.best = value
        colour = {"COMPLETE": "green", "PRUNED": "yellow", "FAIL": "red"}[state]
        result = self._value(value) if value is not None else (reason or "")
        self._print(f"  [{colour}]{state}[/] trial {number}: {result}")
        self._refresh()

    def _value(self, value: float) -> str:
        if self.tokens_per_joule:
            return f"{value:,.3f} output tok/J"
        return f"{value:,.2f} req/s goodput" if self.goodput else f"{value:,.0f} tok/s"

    @staticmethod
    def _at(metrics: LevelMetrics) -> str:
        if getattr(metrics, "request_rate", None) is None:
            return f"c={metrics.concurrency}"
        sent = metrics.achieved_request_rate
        drawn = getattr(metrics, "scheduled_request_rate", None)
        of = f" of {_num(drawn, 2)} scheduled" if drawn is not None else ""
        return f"{metrics.request_rate:g} req/s (sent {_num(sent, 2)}{of})"

    def trial_skipped(self, number: int, reason: str | None) -> None:
        self._print(f"  [dim]trial {number} not run: {reason}[/]")

    def run_finished(self, summary: Any) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        label = " (emulated)" if self.scale.emulated else ""
        best = (
            self._value(self.best).replace("tok/s", "output tok/s") + label
            if self.best is not None
            else "none"
        )
        self.console.print(
            f"[bold]done[/]: {summary.ran} run, "
            + (f"{summary.remeasured} re-measured, " if getattr(summary, "remeasured", 0) else "")
            + f"{summary.skipped} skipped by constraints, "
            + (
                f"{summary.skipped_unsafe} skipped as likely to fail (feasibility), "
                if getattr(summary, "skipped_unsafe", 0)
                else ""
            )
            + f"{summary.reused} reused; "
            # after re-measures the winner is told above by its mean: this is one run's figure
            + (
                f"highest single run {best}; "
                if getattr(summary, "remeasured", 0)
                else f"best so far {best}; "
            )
            + f"host time {_hms(self.host_seconds)}{label}"
            + ("; the search space looks exhausted" if summary.exhausted else "")
            + (
                "; stopped: no real improvement for a while (patience)"
                if summary.patience_stop
                else ""
            )
        )

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    # -- drawing ------------------------------------------------------------------------------

    def _line(self) -> str:
        done = max(0, self.index - 1)
        per_trial = self.host_seconds / done if done else None
        remaining = _hms(per_trial * (self.total - done)) if per_trial else "?"
        best = self._value(self.best) if self.best is not None else "-"
        label = " emulated" if self.scale.emulated else ""
        why = f" ({self.chosen_by})" if self.chosen_by else ""
        return (
            f"trial {self.index}/{self.total}{why} | {self.status} | best {best} | host time "
            f"{_hms(self.host_seconds)} elapsed, ~{remaining} remaining{label}"
        )

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.update(Text(self._line()))

    def _print(self, markup: str) -> None:
        self.console.print(markup, highlight=False)
