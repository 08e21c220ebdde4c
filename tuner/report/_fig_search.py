"""Figures of the search itself: the optimisation history, parameter importances, and the
parallel-coordinates view of every configuration tried."""

from __future__ import annotations

import warnings
from typing import Any

import optuna
from optuna.trial import TrialState
import plotly.graph_objects as go

from tuner.study.record import StudyView, TrialRecord
from tuner.report._style import COLORS, finish, note_figure, throughput_trace
from tuner.report._view import (
    INACTIVE,
    changes_from,
    outcome_text,
    show_value,
    sorted_labels,
)

__all__ = ["MIN_TRIALS_FOR_IMPORTANCE", "history_figure", "importance_figure", "parallel_figure"]

MIN_TRIALS_FOR_IMPORTANCE = 4
# A parameter with more numeric values than this keeps a numeric axis in parallel coordinates.
MAX_CATEGORIES = 8


def _hover(view: StudyView, trial: TrialRecord) -> str:
    base = (
        view.baseline_trial.config
        if view.baseline_trial and trial is not view.baseline_trial
        else None
    )
    changes = changes_from(trial.config, base) or ["same as the baseline"]
    return f"trial {trial.number}: {outcome_text(trial)}<br>" + "<br>".join(changes[:8])


def history_figure(view: StudyView) -> go.Figure:
    """Objective per trial, best-so-far, the baseline as a horizontal line, failures at zero."""
    unit = f"output tok/s{view.label}"
    if not view.records:
        return note_figure("Optimisation history", view.label, "no trials yet")
    fig = go.Figure()
    groups: dict[str, tuple[list[int], list[float], list[str]]] = {
        "COMPLETE": ([], [], []),
        "PRUNED": ([], [], []),
        "FAIL": ([], [], []),
    }
    best_so_far: tuple[list[int], list[float]] = ([], [])
    running = None
    for trial in view.records:
        if trial.state.name not in groups:
            continue
        clean = trial.reported
        y = (
            trial.value
            if trial.state == TrialState.COMPLETE
            else (max(clean.values()) if trial.state == TrialState.PRUNED and clean else 0.0)
        )
        xs, ys, texts = groups[trial.state.name]
        xs.append(trial.number)
        ys.append(y or 0.0)
        texts.append(_hover(view, trial))
        if trial.state == TrialState.COMPLETE and trial.stable and trial.value is not None:
            running = trial.value if running is None else max(running, trial.value)
        if running is not None:
            best_so_far[0].append(trial.number)
            best_so_far[1].append(running)
    styles = {
        "COMPLETE": ("completed", COLORS["complete"], "circle"),
        "PRUNED": ("pruned (best level before the stop)", COLORS["pruned"], "diamond-open"),
        "FAIL": ("failed (no result)", COLORS["fail"], "x"),
    }
    fig.add_trace(
        go.Scatter(
            x=best_so_far[0],
            y=best_so_far[1],
            mode="lines",
            name="best so far",
            line={"shape": "hv", "color": COLORS["best"], "width": 2},
        )
    )
    for state, (xs, ys, texts) in groups.items():
        if xs:
            name, color, symbol = styles[state]
            marker = {"color": color, "symbol": symbol, "size": 9}
            fig.add_trace(throughput_trace(xs, ys, name, texts, "markers", marker=marker))
    if view.best_stable is not None:
        fig.add_trace(
            go.Scatter(
                x=[view.best_stable.number],
                y=[view.best_stable.value],
                mode="markers",
                name=f"best stable (trial {view.best_stable.number})",
                hoverinfo="skip",
                marker={
                    "symbol": "star",
                    "size": 18,
                    "color": COLORS["best"],
                    "line": {"color": "white", "width": 1},
                },
            )
        )
    if view.baseline_trial is not None and view.baseline_trial.value is not None:
        fig.add_hline(
            y=view.baseline_trial.value,
            line={"dash": "dash", "color": COLORS["baseline"], "width": 2},
            annotation_text=f"baseline {view.baseline_trial.value:,.0f} tok/s",
            annotation_position="top left",
        )
    fig.update_xaxes(title="trial", rangemode="tozero")
    fig.update_yaxes(title=unit, rangemode="tozero")
    return finish(fig, "Optimisation history", view.label)


def importance_figure(study: optuna.Study, view: StudyView) -> go.Figure:
    """PED-ANOVA importances over COMPLETE trials (Optuna's default evaluator), or a note.

    The top quantile holds at least 5 trials where the study has them (PED-ANOVA's own advice),
    between the top 10% and the top half.
    """
    title = "Parameter importances"
    done = [t for t in view.records if t.state == TrialState.COMPLETE]
    if len(done) < MIN_TRIALS_FOR_IMPORTANCE:
        return note_figure(
            title,
            view.label,
            f"needs at least {MIN_TRIALS_FOR_IMPORTANCE} completed trials; "
            f"this study has {len(done)}",
        )
    quantile = min(0.5, max(0.1, 5 / len(done)))
    evaluator = optuna.importance.PedAnovaImportanceEvaluator(target_quantile=quantile)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            importances = optuna.importance.get_param_importances(study, evaluator=evaluator)
    except (ValueError, RuntimeError, ZeroDivisionError) as error:
        return note_figure(
            title, view.label, f"not computable yet: {str(error).splitlines()[0][:90]}"
        )
    if not importances or not any(importances.values()):
        return note_figure(title, view.label, "no parameter varies across the completed trials")
    names = list(importances)[::-1]
    values = [importances[n] for n in names]
    fig = go.Figure(
        go.Bar(
            x=values,
            y=names,
            orientation="h",
            marker={"color": COLORS["complete"]},
            text=[f"{v:.0%}" for v in values],
            textposition="outside",
            hovertemplate="%{y}: %{x:.1%}<extra></extra>",
        )
    )
    fig.update_xaxes(
        title=f"for the top {quantile:.0%} of {len(done)} trials",
        tickformat=".0%",
        range=[0, max(values) * 1.2],
    )
    fig.update_yaxes(automargin=True)
    fig = finish(fig, title, view.label)
    fig.update_layout(showlegend=False, margin={"l": 150, "t": 56})
    return fig


def _is_plain_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _axis(name: str, values: list[Any]) -> dict[str, Any]:
    """One parallel-coordinates dimension.

    Numbers on a numeric scale; a few values, or text, as categories. Numbers with many values
    and a few words among them (``unset``, ``inactive``) keep their scale, and each word gets a
    place of its own above the largest number.
    """
    numbers = sorted({v for v in values if _is_plain_number(v)})
    words = sorted_labels({show_value(v) for v in values if not _is_plain_number(v)})
    if numbers and not words:
        return {"label": name, "values": values}
    if len(numbers) > MAX_CATEGORIES:
        low, high = numbers[0], numbers[-1]
        step = (high - low) / 4 or 1.0
        place = {word: high + step * (i + 1) for i, word in enumerate(words)}
        ticks = [low + step * i for i in range(5)]
        return {
            "label": name,
            "values": [v if _is_plain_number(v) else place[show_value(v)] for v in values],
            "tickvals": ticks + list(place.values()),
            "ticktext": [f"{t:,.0f}" if abs(t) >= 100 else f"{t:.3g}" for t in ticks]
            + list(place),
            "range": [low, high + step * len(words)],
        }
    labels = sorted_labels({show_value(v) for v in values})
    index = {label: i for i, label in enumerate(labels)}
    return {
        "label": name,
        "values": [index[show_value(v)] for v in values],
        "tickvals": list(range(len(labels))),
        "ticktext": labels,
        "range": [-0.3, len(labels) - 0.7] if len(labels) > 1 else [-1, 1],
    }


def parallel_figure(view: StudyView) -> go.Figure:
    """Every configuration tried as a line through its settings, outcome and throughput."""
    title = "Parallel coordinates: settings, outcome and throughput"
    tried = [
        t for t in view.records if t.config and t.state.is_finished() and t.reused_from is None
    ]
    if not tried:
        return note_figure(title, view.label, "no finished trial yet", height=420)
    names = list(dict.fromkeys(k for t in tried for k in t.config))
    varying = [n for n in names if len({show_value(t.config.get(n, INACTIVE)) for t in tried}) > 1]
    throughput = []
    for trial in tried:
        clean = trial.reported
        throughput.append(
            trial.value
            if trial.value is not None
            else (max(clean.values()) if trial.state == TrialState.PRUNED and clean else 0.0)
        )
    dimensions = [_axis(n, [t.config.get(n, INACTIVE) for t in tried]) for n in varying]
    dimensions.append(_axis("outcome", [outcome_text(t) for t in tried]))
    dimensions.append({"label": f"output tok/s{view.label}", "values": throughput})
    fig = go.Figure(
        go.Parcoords(
            dimensions=dimensions,
            line={
                "color": throughput,
                "colorscale": "Viridis",
                "showscale": True,
                "colorbar": {"title": {"text": "tok/s"}, "thickness": 12},
            },
            labelangle=-20,
            labelfont={"size": 11},
            tickfont={"size": 10},
        )
    )
    fig = finish(fig, title, view.label, height=420)
    fig.update_layout(margin={"l": 120, "r": 70, "t": 110, "b": 30})
    return fig
