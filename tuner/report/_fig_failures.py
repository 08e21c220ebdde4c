"""Figures of what went wrong: failures grouped by reason, and outcomes by parameter value.

The second figure answers "which setting breaks the server": one row per ``parameter = value``
seen in the study, one column per outcome (``ok``, ``pruned: ...``, each failure reason), and the
number of trials in each cell.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from tuner.report._style import finish, note_figure, outcome_color
from tuner.report._view import INACTIVE, outcome_text, show_value, sorted_labels
from tuner.study.record import StudyView, TrialRecord

__all__ = [
    "BINS",
    "MAX_VALUES",
    "failure_param_figure",
    "failure_reason_figure",
    "outcome_table",
    "value_groups",
]

# A numeric parameter with more distinct values than MAX_VALUES is shown in BINS ranges.
MAX_VALUES = 6
BINS = 4


def _tried(view: StudyView) -> list[TrialRecord]:
    return [t for t in view.records if t.state.is_finished() and t.reused_from is None]


def failure_reason_figure(view: StudyView) -> go.Figure:
    """How many trials failed or were pruned, for each reason; hover lists the trials."""
    title = "Failures and prunes by reason"
    by_reason: dict[str, list[int]] = {}
    for trial in _tried(view):
        outcome = outcome_text(trial)
        if outcome != "ok":
            by_reason.setdefault(outcome, []).append(trial.number)
    if not by_reason:
        return note_figure(
            title, view.label, f"no failed or pruned trial among {len(_tried(view))}"
        )
    reasons = sorted(by_reason, key=lambda r: (r.startswith("pruned"), -len(by_reason[r]), r))
    fails = [r for r in reasons if not r.startswith("pruned")]
    colors = [outcome_color(r, fails.index(r) if r in fails else 0) for r in reasons]
    fig = go.Figure(
        go.Bar(
            x=reasons,
            y=[len(by_reason[r]) for r in reasons],
            marker={"color": colors},
            text=[len(by_reason[r]) for r in reasons],
            textposition="outside",
            customdata=[", ".join(str(n) for n in by_reason[r][:30]) for r in reasons],
            hovertemplate="%{x}: %{y} trial(s)<br>trials %{customdata}<extra></extra>",
        )
    )
    fig.update_yaxes(
        title="trials",
        rangemode="tozero",
        dtick=1 if max(len(v) for v in by_reason.values()) < 8 else None,
    )
    fig.update_xaxes(title="reason")
    fig = finish(fig, title, view.label)
    fig.update_layout(showlegend=False)
    return fig


def value_groups(values: list[Any], max_values: int = MAX_VALUES) -> tuple[list[str], list[str]]:
    """Each value's label, and the labels in reading order.

    Numbers with more than ``max_values`` distinct values are put in ``BINS`` ranges of equal
    width (``0.85-0.88``), so that a continuous parameter does not take a column per trial.
    """
    texts = [show_value(v) for v in values]
    numbers = sorted(
        {v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)}
    )
    if len(numbers) <= max_values:
        return texts, sorted_labels(set(texts))
    low, high = numbers[0], numbers[-1]
    width = (high - low) / BINS
    edges = [low + i * width for i in range(BINS)] + [high]
    ranges = [f"{_num(edges[i])}-{_num(edges[i + 1])}" for i in range(BINS)]

    def label(value: Any, text: str) -> str:
        if value not in numbers:
            return text
        return ranges[min(BINS - 1, int((value - low) / width))]

    labels = [label(v, t) for v, t in zip(values, texts, strict=True)]
    others = sorted_labels({t for v, t in zip(values, texts, strict=True) if v not in numbers})
    return labels, [r for r in ranges if r in labels] + others


def _num(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"


def outcome_table(view: StudyView) -> tuple[list[str], list[str], list[list[int]]]:
    """Rows ``parameter = value``, columns outcomes, cells trial counts (varying parameters)."""
    tried = [t for t in _tried(view) if t.config]
    names = list(dict.fromkeys(k for t in tried for k in t.config))
    outcomes = sorted(
        {outcome_text(t) for t in tried}, key=lambda o: (o != "ok", o.startswith("pruned"), o)
    )
    rows: list[str] = []
    cells: list[list[int]] = []
    for name in names:
        labels, order = value_groups([t.config.get(name, INACTIVE) for t in tried])
        if len(order) < 2:
            continue
        for value in order:
            chosen = [t for t, lab in zip(tried, labels, strict=True) if lab == value]
            rows.append(f"{name} = {value}")
            cells.append([sum(outcome_text(t) == o for t in chosen) for o in outcomes])
    return rows, outcomes, cells


def failure_param_figure(view: StudyView) -> go.Figure:
    """A heatmap of trial counts: outcomes down, parameter values across (grouped by parameter)."""
    title = "Outcomes by parameter value"
    rows, outcomes, cells = outcome_table(view)
    if not rows:
        return note_figure(title, view.label, "no parameter took more than one value yet")
    names = [r.split(" = ", 1)[0] for r in rows]
    counts = [[cells[i][j] for i in range(len(rows))] for j in range(len(outcomes))]
    failing = [[0 if outcomes[j] == "ok" else c for c in counts[j]] for j in range(len(outcomes))]
    columns = list(range(len(rows)))
    fig = go.Figure(
        go.Heatmap(
            z=failing[::-1],
            x=columns,
            y=outcomes[::-1],
            text=counts[::-1],
            texttemplate="%{text}",
            customdata=[rows for _ in outcomes],
            colorscale=[[0, "#f7f7f7"], [1, "#c2185b"]],
            showscale=False,
            xgap=2,
            ygap=2,
            hovertemplate="%{customdata}<br>%{y}: %{text} trial(s)<extra></extra>",
        )
    )
    fig.update_xaxes(
        tickvals=columns,
        ticktext=[_short(r.split(" = ", 1)[1]) for r in rows],
        tickfont={"size": 10},
        tickangle=-45,
        range=[-0.5, len(rows) - 0.5],
        showgrid=False,
    )
    fig.update_yaxes(tickfont={"size": 11}, ticksuffix=" ", showgrid=False)
    for index, name in enumerate(dict.fromkeys(names)):
        first, last = names.index(name), len(names) - 1 - names[::-1].index(name)
        fig.add_annotation(  # neighbours alternate between two rows, so long names do not collide
            x=(first + last) / 2,
            y=1.0 if index % 2 == 0 else 1.09,
            xref="x",
            yref="paper",
            yanchor="bottom",
            text=_short(name, 4 + 12 * (last - first + 1)),
            showarrow=False,
            font={"size": 11},
        )
        if first > 0:
            fig.add_vline(x=first - 0.5, line={"color": "#555", "width": 1.5})
    fig = finish(fig, title, view.label)
    fig.update_layout(margin={"l": 130, "r": 20, "t": 100, "b": 20})
    return fig


def _short(text: str, limit: int = 14) -> str:
    """``text`` cut in the middle to ``limit`` characters (both ends tell values apart)."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return text[:head] + "…" + text[len(text) - (limit - 1 - head) :]
