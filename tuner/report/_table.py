"""The trials table: one row per trial, for ``tuner trials --csv|--json`` and for pandas users.

Columns, in order: ``number, state, value, is_baseline, stable, reason, detail, pruned_by,
reused_from, chosen_by`` (why it was run: ``sampler: tpe``, ``rule: ...``), one ``config.<name>``
per setting (empty when the setting was not active, the text ``unset`` when the flag was left
unset), ``tps@<c>`` per concurrency level (output tokens/s), ``p99_ttft_ms@<c>`` and
``median_tpot_ms@<c>``, ``tokens_per_joule@<c>`` (output tokens per joule of the server's GPUs, empty
without power readings), ``measurement_bound@<c>`` (True: the client fell behind there; the
figure counts as a lower bound when that moves it over 1%: ``tuner.study.record.trial_figure``), then the peak level's ``peak_concurrency``, ``peak_mean_power_w`` and
``peak_mean_util_pct``, ``ready_s``, ``host_seconds``, the validation's ``validated``,
``validated_mean_tps`` and ``validated_std_tps``, ``emulated`` and ``command_line``.
"""

from __future__ import annotations

from typing import Any

import optuna
import pandas as pd

from tuner.errors import ConfigError
from tuner.report._summary import peak_level
from tuner.study.record import (
    EMULATED,
    HOST_SECONDS,
    LEVEL_FIGURES,
    READY_S,
    VALIDATION,
    TrialRecord,
    level_figures,
    read_view,
)

__all__ = ["TABLE_FORMATS", "trials_frame", "trials_text"]

TABLE_FORMATS = ("csv", "json")
BOUND = "measurement_bound"  # per level: True when the client flagged itself (ranked by the one rule: a lower bound)


def _level_column_order(column: str) -> tuple[int, int]:
    name, _, concurrency = column.partition("@")
    return [p for p, _ in LEVEL_FIGURES].index(name) if name != BOUND else len(LEVEL_FIGURES), int(
        concurrency
    )


def _row(trial: TrialRecord, emulated: bool) -> dict[str, Any]:
    ua = trial.user_attrs
    row: dict[str, Any] = {
        "number": trial.number,
        "state": trial.state.name,
        "value": trial.value,
        "is_baseline": trial.is_baseline,
        "stable": trial.stable,
        "reason": trial.reason,
        "detail": trial.detail,
        "pruned_by": trial.result.pruned_by,
        "reused_from": trial.reused_from,
        "chosen_by": trial.chosen_by,
    }
    for name, value in trial.config.items():
        row[f"config.{name}"] = "unset" if value is None else value
    for level in sorted(trial.levels, key=lambda lv: lv.concurrency):
        row.update(level_figures(level.to_dict()))
        # The client measured itself there: the figure is stored, never the configuration's.
        row[f"{BOUND}@{level.concurrency}"] = bool(level.measurement_bound)
    peak = peak_level(trial.levels)
    gpu = (peak.gpu if peak is not None else None) or {}
    validation = ua.get(VALIDATION) or {}
    row.update(
        {
            "peak_concurrency": peak.concurrency if peak is not None else None,
            "peak_mean_power_w": gpu.get("mean_power_w"),
            "peak_mean_util_pct": gpu.get("mean_util_pct"),
            "ready_s": ua.get(READY_S),
            "host_seconds": ua.get(HOST_SECONDS),
            "validated": validation.get("stable") if validation else None,
            "validated_mean_tps": validation.get("mean_output_throughput"),
            "validated_std_tps": validation.get("std_output_throughput"),
            "emulated": bool(ua.get(EMULATED, emulated)),
            "command_line": trial.command_line,
        }
    )
    return row


def _ordered(columns: list[str]) -> list[str]:
    head = [
        c
        for c in columns
        if "." not in c and "@" not in c and not c.startswith(("peak_", "validated"))
    ]
    head = [c for c in head if c not in ("ready_s", "host_seconds", "emulated", "command_line")]
    config = [c for c in columns if c.startswith("config.")]
    levels = sorted(
        (c for c in columns if "@" in c),
        key=_level_column_order,
    )
    tail = [c for c in columns if c not in head and c not in config and c not in levels]
    return head + config + levels + tail


def trials_frame(study: optuna.Study) -> pd.DataFrame:
    """One row per trial of ``study`` (columns: see the module docstring).

    Columns use pandas' nullable dtypes (``Int64``, ``Float64``, ``boolean``), so an integer
    setting stays an integer where another trial lacks it; gaps are ``<NA>``.
    """
    view = read_view(study)
    rows = [_row(trial, view.emulated) for trial in view.records]
    if not rows:
        return pd.DataFrame(
            columns=["number", "state", "value", "is_baseline", "stable", "reason"]
        )
    columns = list(dict.fromkeys(key for row in rows for key in row))
    frame = pd.DataFrame(rows, columns=_ordered(columns)).convert_dtypes()
    return frame.set_index("number", drop=False).rename_axis(None)


def trials_text(study: optuna.Study, fmt: str) -> str:
    """The trials table as CSV or as a JSON list of objects (one per trial, nulls for gaps).

    Raises:
        ConfigError: ``fmt`` is neither ``csv`` nor ``json``.
    """
    frame = trials_frame(study)
    if fmt == "csv":
        return frame.to_csv(index=False)
    if fmt == "json":
        return frame.to_json(orient="records", indent=2, double_precision=15) + "\n"
    raise ConfigError(
        f"trials format {fmt!r}: unknown; fix: use one of {', '.join(TABLE_FORMATS)}"
    )
