"""``tuner best [--at C]``: the best stable trial, overall or at one load level.

Overall: the best stable trial with its spread when it was re-measured (``4,578 +- 2.1% over 3
runs``), a tie with the runner-up when there is one (:mod:`tuner.study.record._winner`), and each
level's figures with its output tokens per joule. ``--at C``: the best stable trial at
concurrency ``C`` (:mod:`tuner.study.record._per_load`), the runner-up there, and the configurations
that read more at ``C`` but failed or dropped requests at another level (left out, named).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console

from tuner.cli_options import EmulateOpt, SpaceArg, StorageOpt, StudyOpt, storage_and_name
from tuner.errors import ConfigError

if TYPE_CHECKING:
    import optuna
    from tuner.space import SearchSpace
    from tuner.study.record import Level

__all__ = ["AtOpt", "best", "best_trial_at"]

AtOpt = Annotated[
    Optional[int],
    typer.Option(
        "--at",
        min=1,
        help="the best stable trial at this concurrency level (one the study measured)",
    ),
]

_UNITS = {
    "output_throughput": "output tok/s",
    "total_throughput": "total tok/s",
    "request_throughput": "req/s",
    "tokens_per_joule": "output tok/J",
}


def best_trial_at(space: SearchSpace, study: optuna.Study, concurrency: int):  # noqa: ANN201 (tuner.study.record.LoadBest)
    """The :class:`LoadBest` at ``concurrency`` by the space's objective metric.

    Raises:
        ConfigError: a goodput study (its levels are rates), or no stable trial measured it.
    """
    from tuner.study.record import best_at, records, study_noise

    objective = space.objective
    if objective.metric == "goodput":
        raise ConfigError(
            f"{space.path}: --at {concurrency}: a goodput study's levels are request "
            "rates, not concurrency levels; fix: leave out --at"
        )
    return best_at(
        records(study),
        concurrency,
        objective.metric,
        objective.max_failed_fraction,
        study_noise(study).relative,
    )


def _level_line(level: Level, label: str) -> str:
    energy = level.tokens_per_joule
    per_joule = f", {energy:.3f} tok/J" if energy is not None else ""
    return f"  c={level.concurrency}: {level.output_throughput:,.0f} tok/s{per_joule}{label}"


def _print_at(console: Console, found: Any, unit: str, label: str) -> None:
    record = found.trial
    runs = f" (mean of {found.runs} runs)" if found.runs > 1 else ""
    console.print(
        f"best stable trial at c={found.concurrency}: trial {record.number}: "
        f"{found.figure:,.4g} {unit}{runs}{label}"
    )
    console.print(
        "  stable: every level of the study ran clean; a configuration that failed or "
        "dropped requests at any level is left out, even where it read more"
    )
    for left in found.excluded:
        console.print(
            f"  left out: trial {left.trial} read {left.figure:,.4g} at c={found.concurrency} "
            f"but {left.why}"
        )
    if found.runner_up is not None:
        other, figure = found.runner_up
        console.print(
            f"  runner-up: trial {other.number}: {figure:,.4g} ({(figure - found.figure) / found.figure:+.1%})"
        )
    for level in record.levels:
        console.print(_level_line(level, label))
    console.print(f"command: {record.command_line}", soft_wrap=True, highlight=False)


def best(
    space_path: SpaceArg,
    storage: StorageOpt = None,
    study_name: StudyOpt = None,
    emulate: EmulateOpt = False,
    at: AtOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Show the best stable trial (--at C: the best at that concurrency level)."""
    from tuner.space import load_space
    from tuner.study.record import EMULATED, best_stable, study_noise, winner_lines
    from tuner.study.storage import load_existing_study

    space = load_space(space_path)
    url, name = storage_and_name(space, storage, study_name, emulate)
    study = load_existing_study(url, name)
    found = best_trial_at(space, study, at) if at is not None else None
    record = found.trial if found is not None else best_stable(study)
    emulated = bool(study.user_attrs.get(EMULATED))
    spread = record.spread(study_noise(study).relative)
    assert spread is not None  # a stable trial has a value
    if as_json:
        print(
            json.dumps(
                {
                    "study": name,
                    "trial": record.number,
                    "emulated": emulated,
                    "output_throughput": record.value,
                    "config": record.config,
                    "command_line": record.command_line,
                    "levels": [level.to_dict() for level in record.levels],
                    "mean": spread.mean,
                    "spread": spread.sd,
                    "runs": spread.runs,
                    **(
                        {
                            "at": at,
                            "figure_at": found.figure,
                            "runs_at": found.runs,
                            "left_out": [vars(e) for e in found.excluded],
                        }
                        if found is not None
                        else {}
                    ),
                },
                indent=2,
            )
        )
        return
    label = " (emulated)" if emulated else ""
    console = Console()
    if found is not None:
        _print_at(console, found, _UNITS.get(space.objective.metric, ""), label)
        return
    unit = _UNITS.get(space.objective.metric, "req/s goodput")
    console.print(f"best stable trial {record.number}: {spread.text(unit)}{label}")
    for line in winner_lines(study, unit)[1:]:
        console.print(line, highlight=False)
    if spread.runs > 1:
        console.print(f"  its first run's levels (the mean above is over {spread.runs} runs):")
    for level in record.levels:
        console.print(_level_line(level, label))
    console.print(f"command: {record.command_line}", soft_wrap=True, highlight=False)
