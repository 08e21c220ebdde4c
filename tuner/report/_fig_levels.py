"""Figures of the measured levels: throughput against concurrency, latency against throughput
with the Pareto front, and GPU power and utilisation against throughput."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from tuner.report._style import (
    COLORS,
    LEVEL_COLORS,
    TOP_COLORS,
    finish,
    log_ticks,
    note_figure,
    throughput_trace,
)
from tuner.report._view import LevelPoint, changes_from, level_points
from tuner.study.record import StudyView, TrialRecord

__all__ = ["concurrency_figure", "gpu_figure", "latency_figure", "pareto_front"]


def _curve(
    fig: go.Figure,
    view: StudyView,
    trial: TrialRecord,
    name: str,
    color: str,
    width: float,
    dash: str | None,
) -> None:
    clean = trial.reported
    levels = sorted(trial.levels, key=lambda lv: lv.concurrency)
    xs = [lv.concurrency for lv in levels]
    ys = [lv.output_throughput for lv in levels]
    base = (
        view.baseline_trial.config
        if view.baseline_trial is not None and trial is not view.baseline_trial
        else None
    )
    detail = "<br>".join(changes_from(trial.config, base)[:8]) or "the baseline"
    symbols = ["circle" if c in clean else "x" for c in xs]
    texts = [f"{name}<br>c={c}{'' if c in clean else ' (not clean)'}<br>{detail}" for c in xs]
    fig.add_trace(
        throughput_trace(
            xs,
            ys,
            name,
            texts,
            "lines+markers",
            line={"color": color, "width": width, "dash": dash},
            marker={"symbol": symbols, "size": 8 if width < 3 else 11, "color": color},
        )
    )


def concurrency_figure(view: StudyView, top: int = 5) -> go.Figure:
    """Output throughput at each concurrency level: the baseline, the best and the top ``top``."""
    title = "Throughput vs concurrency"
    fig = go.Figure()
    if view.baseline_trial is not None and view.baseline_trial.levels:
        _curve(
            fig,
            view,
            view.baseline_trial,
            f"baseline (trial {view.baseline_trial.number})",
            COLORS["baseline"],
            3,
            "dash",
        )
    for rank, trial in enumerate(view.top(top), start=2):
        _curve(
            fig,
            view,
            trial,
            f"#{rank}: trial {trial.number}",
            TOP_COLORS[(rank - 2) % len(TOP_COLORS)],
            1.5,
            None,
        )
    if view.best_stable is not None:
        _curve(
            fig,
            view,
            view.best_stable,
            f"best: trial {view.best_stable.number}",
            COLORS["best"],
            4,
            None,
        )
    if not fig.data:
        return note_figure(title, view.label, "no trial has measured a level yet")
    levels = sorted({lv.concurrency for t in view.records for lv in t.levels})
    fig.update_xaxes(
        title="concurrent requests", type="log", tickvals=levels, ticktext=[str(c) for c in levels]
    )
    fig.update_yaxes(title=f"output tok/s{view.label}", rangemode="tozero")
    fig = finish(fig, title, view.label)
    fig.update_layout(
        legend={"orientation": "v", "yanchor": "top", "y": 1.0, "xanchor": "left", "x": 1.01},
        margin={"t": 56},
    )
    return fig


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both: higher throughput (x) and lower latency (y).

    Returned in order of rising throughput.
    """
    front: list[tuple[float, float]] = []
    best_latency = float("inf")
    for x, y in sorted(points, key=lambda p: (-p[0], p[1])):
        if y < best_latency:
            front.append((x, y))
            best_latency = y
    return front[::-1]


def latency_figure(view: StudyView) -> go.Figure:
    """p99 TTFT and median TPOT against throughput, a point per clean level, with Pareto fronts."""
    title = "Latency vs throughput, with the Pareto front"
    points = [p for p in level_points(view) if p.clean]
    if not points:
        return note_figure(title, view.label, "no level has run clean yet")
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.08,
        subplot_titles=("p99 time to first token", "median time per output token"),
    )
    levels = sorted({p.concurrency for p in points})
    for col, metric in ((1, "p99_ttft_ms"), (2, "median_tpot_ms")):
        for i, level in enumerate(levels):
            chosen = [
                p for p in points if p.concurrency == level and getattr(p, metric) is not None
            ]
            fig.add_trace(
                go.Scatter(
                    x=[p.output_throughput for p in chosen],
                    y=[getattr(p, metric) for p in chosen],
                    mode="markers",
                    name=f"c={level}",
                    legendgroup=f"c={level}",
                    showlegend=col == 1,
                    marker={
                        "color": LEVEL_COLORS[i % len(LEVEL_COLORS)],
                        "size": 7,
                        "opacity": 0.8,
                    },
                    text=[f"trial {p.trial}, c={p.concurrency}" for p in chosen],
                    hovertemplate="%{text}<br>%{x:,.0f} tok/s, %{y:,.1f} ms<extra></extra>",
                ),
                row=1,
                col=col,
            )
        front = pareto_front(
            [
                (p.output_throughput, getattr(p, metric))
                for p in points
                if getattr(p, metric) is not None
            ]
        )
        fig.add_trace(
            go.Scatter(
                x=[x for x, _ in front],
                y=[y for _, y in front],
                mode="lines+markers",
                name="Pareto front",
                legendgroup="front",
                showlegend=col == 1,
                line={"color": COLORS["front"], "width": 2, "shape": "hv"},
                marker={"symbol": "diamond-open", "size": 10, "color": COLORS["front"]},
                hovertemplate="front: %{x:,.0f} tok/s, %{y:,.1f} ms<extra></extra>",
            ),
            row=1,
            col=col,
        )
        ticks, texts = log_ticks(
            [getattr(p, metric) for p in points if getattr(p, metric) is not None]
        )
        fig.update_xaxes(
            title_text=f"output tok/s{view.label}", rangemode="tozero", row=1, col=col
        )
        fig.update_yaxes(
            title_text="ms (log scale)", type="log", tickvals=ticks, ticktext=texts, row=1, col=col
        )
    fig = finish(fig, title, view.label)
    fig.update_annotations(yshift=4, font={"size": 13})
    fig.update_layout(margin={"t": 100}, legend={"y": 1.1})
    return fig


def _gpu_points(view: StudyView) -> list[LevelPoint]:
    return [
        p for p in level_points(view) if p.mean_power_w is not None or p.mean_util_pct is not None
    ]


def gpu_figure(view: StudyView) -> go.Figure:
    """Mean GPU power (left axis) and utilisation (right axis) per level against its throughput."""
    title = "GPU power and utilisation vs throughput"
    points = _gpu_points(view)
    if not points:
        return note_figure(
            title, view.label, "no GPU telemetry was recorded (nvidia-smi not sampled)"
        )
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    text = [
        f"trial {p.trial}, c={p.concurrency}{'' if p.clean else ' (not clean)'}" for p in points
    ]
    power = {"color": COLORS["power"], "size": 8}
    util = {"color": COLORS["util"], "size": 7, "symbol": "triangle-up"}
    # (the level's figure, its name, its marker, its unit in the hover text, on the right axis)
    for field, name, marker, unit, right in (
        ("mean_power_w", "mean power per GPU (W)", power, " W", False),
        ("mean_util_pct", "mean utilisation (%)", util, "%", True),
    ):
        fig.add_trace(
            go.Scatter(
                x=[p.output_throughput for p in points],
                y=[getattr(p, field) for p in points],
                mode="markers",
                name=name,
                text=text,
                marker=marker,
                hovertemplate=f"%{{text}}<br>%{{x:,.0f}} tok/s, %{{y:.0f}}{unit}<extra></extra>",
            ),
            secondary_y=right,
        )
    limits = [p.power_limit_w for p in points if p.power_limit_w]
    if limits:
        fig.add_hline(
            y=max(limits),
            line={"dash": "dot", "color": COLORS["power"]},
            annotation_text=f"power limit {max(limits):.0f} W",
            annotation_position="bottom left",
        )
    top = max([max(limits, default=0.0)] + [p.mean_power_w or 0.0 for p in points])
    fig.update_xaxes(title_text=f"output tok/s{view.label}", rangemode="tozero")
    fig.update_yaxes(title_text="W per GPU", range=[0, top * 1.1], secondary_y=False)
    fig.update_yaxes(
        title_text="utilisation %",
        range=[0, 105],
        tickmode="linear",
        tick0=0,
        dtick=20,
        secondary_y=True,
        showgrid=False,
    )
    return finish(fig, title, view.label)
