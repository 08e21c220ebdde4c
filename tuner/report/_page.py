"""The self-contained HTML report: a summary of the study and its figures on one page.

plotly.js is embedded once, inline, in the page head (no CDN: the page opens offline and from a
file). Every text that comes from the study is HTML-escaped.
"""

from __future__ import annotations

import datetime as dt
import html
from pathlib import Path

import optuna
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

import tuner
from tuner.report._fig_energy import energy_figure
from tuner.report._fig_failures import failure_param_figure, failure_reason_figure
from tuner.report._fig_levels import concurrency_figure, gpu_figure, latency_figure
from tuner.report._fig_search import history_figure, importance_figure, parallel_figure
from tuner.report._per_load import per_load_html, winner_html
from tuner.report._style import FIGURE_HEIGHT
from tuner.report._summary import summary_html, top_trials_html
from tuner.study.record import ENGINE, HOST, SPACE_FILE, StudyView, read_view

__all__ = ["FIGURE_COUNT", "build_report", "report_title", "write_report"]

# The figures of the page, in order (the browser test checks that each is drawn).
FIGURE_COUNT = 9

_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
       background: #f3f4f6; color: #1f2328; }
header { background: #1f2937; color: #fff; padding: 18px 28px 14px; }
header h1 { margin: 0 0 4px; font-size: 24px; font-weight: 600; }
header .sub { color: #cbd5e1; font-size: 13px; }
.emulated-tag { background: #f59e0b; color: #1f2937; border-radius: 4px; padding: 1px 8px;
                font-size: 14px; vertical-align: middle; margin-left: 6px; }
main { padding: 14px 22px 28px; }
.cards { display: grid; grid-template-columns: repeat(4, 1fr); gap: 12px; margin-bottom: 12px; }
.card { background: #fff; border-radius: 8px; padding: 10px 14px; box-shadow: 0 1px 2px #0001; }
.card .k { color: #6b7280; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; }
.card .v { font-size: 22px; font-weight: 600; margin-top: 2px; }
.card .d { color: #4b5563; font-size: 12px; margin-top: 2px; }
.panel { background: #fff; border-radius: 8px; padding: 10px 14px; margin-bottom: 12px;
         box-shadow: 0 1px 2px #0001; font-size: 13px; }
.panel h2 { font-size: 15px; margin: 2px 0 8px; }
pre.cmd { white-space: pre-wrap; word-break: break-all; background: #f6f8fa; padding: 8px;
          border-radius: 6px; margin: 6px 0 0; font-size: 12px; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid #e5e7eb;
         vertical-align: top; }
th { color: #6b7280; font-weight: 600; font-size: 12px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.grid { display: grid; grid-template-columns: repeat(6, 1fr); gap: 12px; margin-bottom: 12px; }
.fig { background: #fff; border-radius: 8px; padding: 4px; box-shadow: 0 1px 2px #0001;
       min-width: 0; }
.span-2 { grid-column: span 2; } .span-3 { grid-column: span 3; } .span-6 { grid-column: span 6; }
footer { color: #6b7280; font-size: 12px; padding: 0 24px 24px; }
"""


def report_title(view: StudyView) -> str:
    """``tuner report: <study>`` plus `` (emulated)`` for an emulated study."""
    return f"tuner report: {view.name}{view.label}"


def _figure_div(fig: go.Figure, index: int) -> str:
    height = int(fig.layout.height or FIGURE_HEIGHT)
    return fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=f"figure-{index}",
        default_width="100%",
        default_height=f"{height}px",
        config={"responsive": True, "displaylogo": False, "displayModeBar": False},
    )


def _figures(study: optuna.Study, view: StudyView) -> list[tuple[go.Figure, int]]:
    """The figures in page order, each with its width in sixths of the page."""
    return [
        (history_figure(view), 3),
        (concurrency_figure(view), 3),
        (latency_figure(view), 6),
        (importance_figure(study, view), 2),
        (failure_reason_figure(view), 2),
        (gpu_figure(view), 2),
        (energy_figure(view), 6),
        (parallel_figure(view), 6),
        (failure_param_figure(view), 6),
    ]


def _relative(path: str) -> str:
    """``path`` relative to the current folder when it lies below it (shorter in the header)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return path


def build_report(study: optuna.Study, space_name: str | None = None) -> str:
    """The report of ``study`` as one self-contained HTML page.

    Args:
        study: the study to show (read once).
        space_name: the search-space file the study came from, shown in the header
            (default: the study's ``space_file`` attribute).

    Returns:
        The HTML text.
    """
    view = read_view(study)
    figures = _figures(study, view)
    title = report_title(view)
    space = _relative(str(space_name or view.attrs.get(SPACE_FILE) or "?"))
    tag = '<span class="emulated-tag">emulated</span>' if view.emulated else ""
    sub = " · ".join(
        html.escape(str(part))
        for part in (
            f"space {space}",
            f"engine {view.attrs.get(ENGINE, '?')}",
            f"host {view.attrs.get(HOST, '?')}",
            f"{len(view.records)} trials",
        )
    )
    cells = "\n".join(
        f'<div class="fig span-{span}">{_figure_div(fig, i)}</div>'
        for i, (fig, span) in enumerate(figures)
    )
    generated = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    emulated_note = (
        " Figures come from the emulated host (calibrated to the reference reading), converted "
        "to the real host's time scale."
        if view.emulated
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{html.escape(title)}</title>
<style>{_CSS}</style>
<script type="text/javascript">{get_plotlyjs()}</script>
</head>
<body>
<header><h1>{html.escape(title.removesuffix(view.label))}{tag}</h1>
<div class="sub">{sub}</div></header>
<main>
{summary_html(view)}
{winner_html(study, view)}
{per_load_html(study, view)}
<div class="grid">
{cells}
</div>
{top_trials_html(view)}
</main>
<footer>tuner {html.escape(tuner.__version__)} · generated {generated}.{emulated_note}
Throughput is output tokens per second over a level; pruned trials show their best level
before they were stopped; failed trials show at zero.</footer>
</body>
</html>
"""


def write_report(study: optuna.Study, out: Path, space_name: str | None = None) -> Path:
    """Write :func:`build_report` to ``out`` (parent folders created) and return the path."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build_report(study, space_name), encoding="utf-8")
    return out
