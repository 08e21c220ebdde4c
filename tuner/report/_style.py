"""The report's look: colours per outcome and role, the common layout, and the empty-figure note.

Every figure goes through :func:`finish`, so titles, fonts and margins agree, and an emulated study
has "(emulated)" in every figure title. A figure with nothing to show is still drawn, with a note
that says why (:func:`note_figure`), so a reader never wonders whether a plot failed.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import plotly.graph_objects as go

__all__ = [
    "COLORS",
    "FIGURE_HEIGHT",
    "LEVEL_COLORS",
    "OUTCOME_COLORS",
    "finish",
    "Ticks",
    "log_ticks",
    "note_figure",
    "outcome_color",
    "throughput_trace",
]

COLORS = {
    "baseline": "#6c757d",
    "best": "#d62728",
    "complete": "#1f77b4",
    "pruned": "#bcbd22",
    "fail": "#e377c2",
    "front": "#111111",
    "power": "#ff7f0e",
    "util": "#2ca02c",
}
OUTCOME_COLORS = {
    "ok": COLORS["complete"],
    "pruned: baseline": COLORS["pruned"],
    "pruned: constraint": "#dbdb8d",
}
TOP_COLORS = ("#1f77b4", "#2ca02c", "#9467bd", "#17becf", "#8c564b")
LEVEL_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#9d755d")
FAIL_PALETTE = ("#e377c2", "#d62728", "#ff9896", "#c5b0d5", "#8c564b", "#f7b6d2", "#7f7f7f")


def outcome_color(outcome: str, index: int = 0) -> str:
    """The colour of an outcome (``ok``, ``pruned: ...``, or a failure reason)."""
    return OUTCOME_COLORS.get(outcome, FAIL_PALETTE[index % len(FAIL_PALETTE)])


FIGURE_HEIGHT = 380


def finish(fig: go.Figure, title: str, label: str, *, height: int = FIGURE_HEIGHT) -> go.Figure:
    """Apply the common layout; ``label`` is " (emulated)" or "" and ends the title.

    The title sits at the top left, the legend in one row between the title and the plot.
    """
    fig.update_layout(
        title={
            "text": f"{title}{label}",
            "x": 0.01,
            "xanchor": "left",
            "y": 0.985,
            "yanchor": "top",
            "yref": "container",
            "font": {"size": 16},
        },
        template="plotly_white",
        height=height,
        margin={"l": 60, "r": 20, "t": 78, "b": 48},
        legend={
            "orientation": "h",
            "yanchor": "bottom",
            "y": 1.02,
            "xanchor": "left",
            "x": 0.0,
            "font": {"size": 11},
        },
        font={"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12},
        hoverlabel={"namelength": -1},
    )
    return fig


def note_figure(title: str, label: str, note: str, *, height: int = FIGURE_HEIGHT) -> go.Figure:
    """A drawn figure that holds only a note (nothing to plot yet, and why)."""
    fig = go.Figure()
    fig.add_annotation(
        text=note,
        x=0.5,
        y=0.5,
        xref="paper",
        yref="paper",
        showarrow=False,
        font={"size": 14, "color": "#555"},
    )
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return finish(fig, title, label, height=height)


class Ticks(NamedTuple):
    """An axis's tick positions and the text at each."""

    values: list[float]
    texts: list[str]


def log_ticks(values: list[float]) -> Ticks:
    """Ticks at 1, 2 and 5 times powers of ten covering ``values`` (for a log axis in ms)."""
    positive = [v for v in values if v and v > 0]
    if not positive:
        return Ticks([], [])
    low, high = min(positive), max(positive)
    ticks: list[float] = []
    decade = 10.0 ** math.floor(math.log10(low))
    while decade <= high * 10:
        ticks += [m * decade for m in (1, 2, 5) if low / 2 <= m * decade <= high * 2]
        decade *= 10
    return Ticks(ticks, [f"{t:,.0f}" if t >= 1 else f"{t:g}" for t in ticks])


def throughput_trace(
    xs: list[Any], ys: list[Any], name: str, texts: list[str], mode: str, **look: Any
) -> go.Scatter:
    """Output throughputs (``ys``, tok/s) at ``xs``, each point's hover text above its figure."""
    return go.Scatter(
        x=xs,
        y=ys,
        mode=mode,
        name=name,
        text=texts,
        hovertemplate="%{text}<br>%{y:,.0f} tok/s<extra></extra>",
        **look,
    )
