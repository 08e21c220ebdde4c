"""The report's head: cards with the answer (best vs baseline), the best command, top trials."""

from __future__ import annotations

import html
from collections.abc import Sequence

from tuner.report._view import changes_from
from tuner.study.record import (
    HOST,
    VALIDATION,
    Level,
    StudyView,
    TrialRecord,
    figures_by_level,
    trial_figure,
)

__all__ = ["measurement_bound_html", "peak_level", "summary_html", "top_trials_html"]


def peak_level(levels: Sequence[Level]) -> Level | None:
    """The level the trial's output throughput is ranked at by the study's one rule
    (:func:`tuner.study.record.trial_figure`: a level the client under-drove counts as a lower
    bound); the highest level measured when no level ran clean (None without levels)."""
    figure = trial_figure(levels, "output_throughput", 1.0)
    if figure.concurrency is not None:
        return next(level for level in levels if level.concurrency == figure.concurrency)
    return max(levels, key=lambda level: level.output_throughput or 0.0) if levels else None


def measurement_bound_html(view: StudyView) -> str:
    """A panel listing the levels whose client measured itself (kept, never ranked)."""
    bound = [
        (trial.number, level)
        for trial in view.records
        for level in trial.levels
        if level.measurement_bound
    ]
    if not bound:
        return ""
    judged = {
        trial.number: figures_by_level(trial.levels, "output_throughput", 1.0)
        for trial in view.records
    }

    def counted(number: int, level: Level) -> str:
        figure = judged[number].get(level.concurrency)
        if figure is None:
            return "not clean"
        if figure.effect is None:
            return "a lower bound"
        return f"{'a lower bound' if figure.bound else 'measured'} (+{figure.effect:.1%} driven fully)"

    rows = "".join(
        f"<tr><td class=num>{number}</td><td class=num>{level.concurrency}</td>"
        f"<td class=num>{_tps(level.output_throughput)}</td>"
        f"<td class=num>{'–' if level.in_flight is None else f'{level.in_flight:,.0f}'}</td>"
        f"<td>{counted(number, level)}</td>"
        f"<td>{html.escape(str(level.measurement_bound).split(': its figure')[0])}</td></tr>"
        for number, level in bound
    )
    return (
        f'<div class="panel"><h2>Measurement-bound levels{html.escape(view.label)}: '
        f"{len(bound)}</h2><div>The client flagged itself at these levels (its event loop "
        "lagged, its CPU was saturated, it sent requests late, or the emulator fell behind its "
        "schedule), after running each again with more client processes. The server saw fewer "
        "requests in flight than asked; where that moves the figure by more than 1% it counts "
        "as a lower bound (it can lift a trial's figure, never sink it), else as measured. "
        "Run again with <code>--client-workers N</code>, fewer concurrent streams per process, "
        "or a bigger client machine to measure them exactly.</div>"
        "<table><tr><th class=num>trial</th><th class=num>c</th><th class=num>measured</th>"
        "<th class=num>in flight</th><th>counted as</th><th>cause</th></tr>"
        + rows
        + "</table></div>"
    )


def _card(key: str, value: str, detail: str = "") -> str:
    return (
        f'<div class="card"><div class="k">{html.escape(key)}</div>'
        f'<div class="v">{html.escape(value)}</div>'
        f'<div class="d">{html.escape(detail)}</div></div>'
    )


def _tps(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f} tok/s"


def _validation_card(best: TrialRecord) -> str:
    validation = best.user_attrs.get(VALIDATION)
    if not validation:
        return _card("validation", "not yet", "run `tuner validate` before deploying")
    runs = validation.get("runs", "?")
    if not validation.get("stable", False):
        return _card("validation", "UNSTABLE", f"errors or a crash during the soak ({runs} runs)")
    mean, std = validation.get("mean_output_throughput"), validation.get("std_output_throughput")
    if mean is None:
        return _card("validation", "stable", f"{runs} soak runs")
    return _card(
        "validation: stable", f"{mean:,.0f} ± {std or 0:,.0f}", f"tok/s over {runs} soak runs"
    )


def _cards(view: StudyView) -> str:
    label = view.label
    base = view.baseline_trial.value if view.baseline_trial is not None else None
    best = view.best_stable
    counts = view.state_counts()
    if best is not None and best.value is not None:
        # a re-measured winner by the mean of its runs: its first run alone may be its luckiest
        spread = best.spread()
        assert spread is not None  # the best has a value
        gain = f"{spread.mean / base:.2f}x the baseline" if base else "no baseline measured"
        over = f" · mean of {spread.runs} runs" if spread.runs > 1 else ""
        best_card = _card(
            f"best stable{label}", _tps(spread.mean), f"trial {best.number}{over} · {gain}"
        )
    else:
        best_card = _card(
            f"best stable{label}", "none yet", "no trial completed with every level clean"
        )
    base_card = _card(
        f"baseline{label}",
        _tps(base),
        f"trial {view.baseline_trial.number}"
        if view.baseline_trial is not None
        else "not run yet",
    )
    trials_card = _card(
        "trials",
        str(len(view.records)),
        " · ".join(
            f"{counts[s]} {s.lower()}"
            for s in ("COMPLETE", "PRUNED", "FAIL", "RUNNING")
            if counts.get(s)
        ),
    )
    last = (
        _validation_card(best)
        if best is not None
        else _card("host", str(view.attrs.get(HOST, "?")))
    )
    return f'<div class="cards">{best_card}{base_card}{trials_card}{last}</div>'


def _best_panel(view: StudyView) -> str:
    best = view.best_stable
    if best is None:
        return ""
    base = (
        view.baseline_trial.config
        if view.baseline_trial is not None and best is not view.baseline_trial
        else None
    )
    changes = ", ".join(changes_from(best.config, base)) or "none: the baseline is the best"
    return (
        f'<div class="panel"><h2>Best stable configuration: trial {best.number}</h2>'
        f"<div>Changes from the baseline: <b>{html.escape(changes)}</b></div>"
        f'<pre class="cmd">{html.escape(best.command_line or "(no command line recorded)")}'
        "</pre></div>"
    )


def top_trials_html(view: StudyView, count: int = 8) -> str:
    """A table of the ``count`` best completed trials and how each differs from the baseline."""
    ranked = view.completed[:count]
    if not ranked:
        return ""
    base = view.baseline_trial.value if view.baseline_trial is not None else None
    base_config = view.baseline_trial.config if view.baseline_trial is not None else None
    rows = []
    for trial in ranked:
        peak = peak_level(trial.levels)
        ratio = f"{trial.value / base:.2f}x" if base and trial.value else "–"
        ttft = peak.p99_ttft_ms if peak is not None else None
        changes = (
            "baseline"
            if trial.is_baseline
            else ", ".join(changes_from(trial.config, base_config)[:6])
        )
        spread = trial.spread()
        again = (
            f" (mean of {spread.runs} runs: {spread.mean:,.0f})"
            if spread is not None and spread.runs > 1
            else ""
        )
        rows.append(
            f"<tr><td class=num>{trial.number}</td><td class=num>{_tps(trial.value)}{again}</td>"
            f"<td class=num>{ratio}</td><td class=num>{peak.concurrency if peak is not None else '–'}</td>"
            f"<td class=num>{'–' if ttft is None else f'{ttft:,.0f} ms'}</td>"
            f"<td class=num>{'yes' if trial.stable else 'no'}</td>"
            f"<td>{html.escape(changes)}</td><td>{html.escape(trial.chosen_by)}</td></tr>"
        )
    return (
        f'<div class="panel"><h2>Top completed trials{html.escape(view.label)}</h2><table><tr>'
        "<th class=num>trial</th><th class=num>output tok/s</th><th class=num>vs baseline</th>"
        "<th class=num>peak at c</th><th class=num>p99 TTFT there</th>"
        "<th class=num>all levels clean</th>"
        "<th>changes from the baseline</th><th>chosen by</th></tr>"
        + "".join(rows)
        + "</table></div>"
    )


def summary_html(view: StudyView) -> str:
    """The cards, the best configuration and any measurement-bound levels, as HTML."""
    return _cards(view) + _best_panel(view) + measurement_bound_html(view)
