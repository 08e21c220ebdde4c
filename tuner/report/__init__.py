"""Reading a study: the self-contained HTML report and the trials table.

``build_report(study)`` returns one HTML page (plotly, inline, no network) with the optimisation
history, throughput against concurrency, latency against throughput with the Pareto front,
parameter importances, parallel coordinates, failures by reason and by parameter value, GPU
power and utilisation, energy per token against throughput with its Pareto front, the best
stable trial at each load level, and the winner with its spread over re-measured runs; ``write_report(study, path)`` writes it. ``trials_frame(study)`` is the
trials table as a pandas DataFrame; ``trials_text(study, "csv"|"json")`` its text.
"""

from __future__ import annotations

from tuner.report._fig_levels import pareto_front
from tuner.report._page import FIGURE_COUNT, build_report, report_title, write_report
from tuner.report._table import TABLE_FORMATS, trials_frame, trials_text

__all__ = [
    "FIGURE_COUNT",
    "TABLE_FORMATS",
    "build_report",
    "pareto_front",
    "report_title",
    "trials_frame",
    "trials_text",
    "write_report",
]
