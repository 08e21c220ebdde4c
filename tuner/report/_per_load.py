"""The report's panels on which configuration wins where: the best stable trial at each load
level (:mod:`tuner.study.record._per_load`) with its tokens per joule there, and the winner with its
spread over re-measured runs, or the tie (:mod:`tuner.study.record._winner`)."""

from __future__ import annotations

import html

import optuna

from tuner.study.record import (
    StudyView,
    TrialRecord,
    best_by_load,
    load_contrast,
    tokens_per_joule,
    winner_lines,
)

__all__ = ["per_load_html", "winner_html"]


def _energy_at(record: TrialRecord, concurrency: int) -> str:
    level = record.level_at(concurrency)
    value = tokens_per_joule(level) if level is not None else None
    return "–" if value is None else f"{value:.3f}"


def per_load_html(study: optuna.Study, view: StudyView) -> str:
    """A table: per level, the best stable trial, its output tok/s and tok/J there, the runner-up,
    and the configurations left out there because they failed at another level."""
    bests = best_by_load(list(view.records), noise=view.noise.relative)
    if not bests:
        return ""
    rows = []
    for found in bests:
        runner = (
            f"trial {found.runner_up[0].number}: {found.runner_up[1]:,.0f}"
            if found.runner_up is not None
            else "–"
        )
        left = (
            "; ".join(f"trial {e.trial} ({e.figure:,.0f}): {e.why}" for e in found.excluded) or "–"
        )
        rows.append(
            f"<tr><td class=num>{found.concurrency}</td><td class=num>{found.trial.number}</td>"
            f"<td class=num>{found.figure:,.0f}{f' (mean of {found.runs} runs)' if found.runs > 1 else ''}</td>"
            f"<td class=num>{_energy_at(found.trial, found.concurrency)}</td>"
            f"<td>{html.escape(runner)}</td><td>{html.escape(left)}</td></tr>"
        )
    contrast = load_contrast(bests, noise=view.noise.relative)
    note = f"<div><b>{html.escape(contrast)}</b></div>" if contrast else ""
    return (
        f'<div class="panel"><h2>Best stable configuration at each load{html.escape(view.label)}</h2>'
        f"{note}<table><tr><th class=num>concurrency</th><th class=num>trial</th>"
        "<th class=num>output tok/s</th><th class=num>output tok/J</th><th>runner-up</th>"
        "<th>left out (read more there, failed or dropped requests at another level)</th></tr>"
        + "".join(rows)
        + "</table></div>"
    )


def winner_html(study: optuna.Study, view: StudyView) -> str:
    """The winner with its spread over runs, and the tie with the runner-up if there is one."""
    lines = winner_lines(study)
    if not lines:
        return ""
    body = "".join(f"<div>{html.escape(line)}{html.escape(view.label)}</div>" for line in lines)
    return f'<div class="panel"><h2>Winner beyond noise</h2>{body}</div>'
