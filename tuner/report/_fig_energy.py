"""Throughput against energy per token, a point per clean level of each stable trial, with the
Pareto front (more output tokens per second for fewer joules per token)."""

from __future__ import annotations

import plotly.graph_objects as go

from tuner.report._fig_levels import pareto_front
from tuner.report._style import COLORS, LEVEL_COLORS, finish, note_figure
from tuner.study.record import StudyView, energy_points

__all__ = ["energy_figure"]


def energy_figure(view: StudyView) -> go.Figure:
    """Joules per output token (from the GPU power sampled during each level) against throughput."""
    title = "Energy per token vs throughput, with the Pareto front"
    points = energy_points(view.records)
    if not points:
        return note_figure(
            title, view.label, "no GPU power was recorded for the GPUs the server used"
        )
    fig = go.Figure()
    for i, level in enumerate(sorted({p.concurrency for p in points})):
        chosen = [p for p in points if p.concurrency == level]
        fig.add_trace(
            go.Scatter(
                x=[p.output_throughput for p in chosen],
                y=[p.joules_per_token for p in chosen],
                mode="markers",
                name=f"c={level}",
                marker={"color": LEVEL_COLORS[i % len(LEVEL_COLORS)], "size": 7, "opacity": 0.8},
                text=[
                    f"trial {p.trial}, c={p.concurrency}, {p.tokens_per_joule:.3f} tok/J"
                    for p in chosen
                ],
                hovertemplate="%{text}<br>%{x:,.0f} tok/s, %{y:.3f} J/token<extra></extra>",
            )
        )
    front = pareto_front([(p.output_throughput, p.joules_per_token) for p in points])
    fig.add_trace(
        go.Scatter(
            x=[x for x, _ in front],
            y=[y for _, y in front],
            mode="lines+markers",
            name="Pareto front",
            line={"color": COLORS["front"], "width": 2, "shape": "hv"},
            marker={"symbol": "diamond-open", "size": 10, "color": COLORS["front"]},
            hovertemplate="front: %{x:,.0f} tok/s, %{y:.3f} J/token<extra></extra>",
        )
    )
    fig.update_xaxes(title_text=f"output tok/s{view.label}", rangemode="tozero")
    fig.update_yaxes(title_text=f"joules per output token{view.label}", rangemode="tozero")
    return finish(fig, title, view.label)
