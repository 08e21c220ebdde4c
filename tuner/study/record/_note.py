"""What a study shows in optuna-dashboard: its metric names, a Markdown note on every trial and
one on the study.

The trial's note says what the terminal said of it: who chose it and why, what it changed from
the baseline, each level's throughput, TTFT, TPOT and output tokens per joule, and its outcome
with the reason. The study's note holds the winner's lines, re-measures included (a re-run is
stored on the study, not as a trial of its own: :mod:`tuner.study.loop._confirm`). Notes are
written with optuna-dashboard's public :func:`optuna_dashboard.save_note`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import optuna

from tuner.space import SET_SUFFIX
from tuner.study.record._keys import COMMAND_LINE, LEVELS
from tuner.study.record._level import Level, read_levels

__all__ = [
    "Change",
    "changes_from",
    "metric_names",
    "name_metrics",
    "save_study_note",
    "save_trial_note",
    "study_note",
    "trial_note",
    "write_trial_note",
]

# The objective's figure as the dashboard's axes name it.
_METRIC_NAMES = {
    "output_throughput": "output_throughput (tok/s)",
    "total_throughput": "total_throughput (tok/s)",
    "request_throughput": "request_throughput (req/s)",
    "goodput": "goodput (req/s within the SLO)",
    "tokens_per_joule": "tokens_per_joule (output tok/J)",
}


@dataclass(frozen=True)
class Change:
    """One setting of a configuration that differs from the baseline (None: unset)."""

    name: str
    baseline: Any
    value: Any

    def text(self) -> str:
        return f"{self.name}={_shown(self.value)} (baseline {_shown(self.baseline)})"


def _shown(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def changes_from(baseline: Mapping[str, Any], config: Mapping[str, Any]) -> list[Change]:
    """The settings of ``config`` that differ from ``baseline``, in the configuration's order."""
    names = list(dict.fromkeys([*config, *baseline]))
    return [
        Change(name, baseline.get(name), config.get(name))
        for name in names
        if baseline.get(name) != config.get(name)
    ]


def metric_names(objective: Any) -> list[str]:
    """The study's objective names: the metric, and the latency minimised in a two-objective
    study (``objective.minimize``)."""
    names = [_METRIC_NAMES.get(objective.metric, objective.metric)]
    if getattr(objective, "minimize", None):
        names.append(str(objective.minimize))
    return names


def name_metrics(study: optuna.Study, objective: Any) -> None:
    """Set the study's metric names (the dashboard's axes) when they are not these already."""
    names = metric_names(objective)
    if len(names) == len(study.directions) and study.metric_names != names:
        study.set_metric_names(names)


def _number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _level_table(levels: Sequence[Level]) -> list[str]:
    rows = [
        (
            "| level | output tok/s | TTFT p50 / p99 (ms) | TPOT p50 (ms) | output tok/J | "
            "done / failed | stopped |"
        ),
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for level in levels:
        at = (
            f"{level.request_rate:g} req/s"
            if level.request_rate is not None
            else f"c={level.concurrency}"
        )
        rows.append(
            f"| {at} | {_number(level.output_throughput)} | {_number(level.median_ttft_ms)} / "
            f"{_number(level.p99_ttft_ms)} | {_number(level.median_tpot_ms, 1)} | "
            f"{_number(level.tokens_per_joule, 3)} | {level.completed} / {level.failed} | "
            f"{level.stop_reason or ''} |"
        )
    return rows


def trial_note(
    *,
    number: int,
    is_baseline: bool,
    chosen_by: str,
    changes: Sequence[Change],
    levels: Sequence[Level],
    state: str,
    value: str | None,
    reason: str | None,
    emulated: bool,
    command_line: str | None = None,
) -> str:
    """The trial's note in Markdown."""
    label = " (emulated host: figures of the emulator, not measured on a GPU)" if emulated else ""
    lines = [f"## {'Baseline' if is_baseline else 'Trial'} {number}{label}", ""]
    if is_baseline:
        lines.append(
            "**Chosen by:** the space's baseline, run first: every trial is compared with it."
        )
    else:
        lines.append(f"**Chosen by:** {chosen_by or 'the sampler'}")
    lines += ["", "**Changes from the baseline:**"]
    if is_baseline:
        lines.append("none (this is the baseline)")
    elif changes:
        lines += [
            f"- `{change.name}`: {_shown(change.value)} (baseline {_shown(change.baseline)})"
            for change in changes
        ]
    else:
        lines.append("none: the baseline's configuration")
    lines += ["", "**Levels:**", ""]
    lines += _level_table(levels) if levels else ["no level measured"]
    outcome = f"**Outcome:** {state}"
    if value is not None:
        outcome += f", {value}"
    if reason:
        outcome += f": {reason}"
    lines += ["", outcome]
    if command_line:
        lines += ["", "**Command:**", "", f"```\n{command_line}\n```"]
    return "\n".join(lines) + "\n"


def save_trial_note(trial: optuna.Trial, text: str) -> None:
    """Write ``text`` as the trial's note in optuna-dashboard."""
    from optuna_dashboard import save_note

    save_note(trial, text)


def write_trial_note(
    trial: optuna.Trial,
    *,
    baseline: Mapping[str, Any],
    config: Mapping[str, Any],
    is_baseline: bool,
    chosen_by: str,
    state: str,
    value: str | None,
    reason: str | None,
    emulated: bool,
) -> None:
    """Write the note of a trial the loop just finished, its levels read from what it stored."""
    attrs = trial.user_attrs
    save_trial_note(
        trial,
        trial_note(
            number=trial.number,
            is_baseline=is_baseline,
            chosen_by=chosen_by,
            changes=changes_from(baseline, config),
            levels=read_levels(attrs.get(LEVELS)),
            state=state,
            value=value,
            reason=reason,
            emulated=emulated,
            command_line=attrs.get(COMMAND_LINE),
        ),
    )


def study_note(winner: Sequence[str], optional: Sequence[str] = ()) -> str:
    """The study's note: the winner's lines (re-measures included) and what each helper
    parameter ``NAME is set`` of an optional setting means."""
    text = "## Winner\n\n" + "\n".join(f"- {line.strip()}" for line in winner) + "\n"
    if optional:
        text += (
            "\n## Parameters named `NAME is set`\n\nEach chooses whether the setting NAME is given "
            "at all: true puts NAME's flag on the command line with the value in NAME, false leaves "
            "it to the engine's default (NAME is then not sampled). The sampler needs it; the "
            "plots show it beside NAME: "
            + ", ".join(f"`{name}{SET_SUFFIX}`" for name in optional)
            + ".\n"
        )
    return text


def save_study_note(
    study: optuna.Study, winner: Sequence[str], optional: Sequence[str] = ()
) -> None:
    """Write the study's note in optuna-dashboard (:func:`study_note`)."""
    from optuna_dashboard import save_note

    save_note(study, study_note(winner, optional))
