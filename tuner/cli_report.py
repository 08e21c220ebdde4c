"""``tuner report`` and ``tuner trials``: reading a finished (or running) study.

The lead's typer app registers them with ``app.command("report")(report)`` and
``app.command("trials")(trials)``. Both read the study the way the other commands find it (the
search space's default storage and name, or ``--storage``/``--study-name``); a missing storage or
study is a one-line error naming what exists (exit 2).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tuner.cli_options import EmulateOpt, SpaceArg, StorageOpt, StudyOpt, storage_and_name
from tuner.errors import ConfigError

if TYPE_CHECKING:
    import optuna

__all__ = ["report", "trials"]


def _study(
    space_path: Path, storage: str | None, study_name: str | None, emulate: bool
) -> optuna.Study:
    import optuna

    from tuner.space import load_space
    from tuner.study.storage import load_existing_study

    space = load_space(space_path)
    url, name = storage_and_name(space, storage, study_name, emulate)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return load_existing_study(url, name)


def report(
    space_path: SpaceArg,
    out: Annotated[Path, typer.Option("--out", help="where to write the HTML page")] = Path(
        "report.html"
    ),
    storage: StorageOpt = None,
    study_name: StudyOpt = None,
    emulate: EmulateOpt = False,
) -> None:
    """Write one self-contained HTML page with the study's figures (opens offline)."""
    from tuner.report import write_report
    from tuner.study.record import read_view

    study = _study(space_path, storage, study_name, emulate)
    path = write_report(study, out, space_name=str(space_path))
    view = read_view(study)
    winner = view.best_stable
    spread = winner.spread(view.noise.relative) if winner is not None else None
    best = (
        f"best stable trial {winner.number}: {spread.text('output tok/s')}"
        if winner is not None and spread is not None
        else "no stable trial yet"
    )
    print(f"wrote {path}: {len(view.records)} trials, {best}{view.label}")


def trials(
    space_path: SpaceArg,
    as_csv: Annotated[
        bool, typer.Option("--csv", help="CSV, one row per trial (the default)")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="a JSON list, one object per trial")
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="write to this file instead of stdout")
    ] = None,
    storage: StorageOpt = None,
    study_name: StudyOpt = None,
    emulate: EmulateOpt = False,
) -> None:
    """One row per trial: number, state, value, reason, settings (config.*), per-level figures."""
    from tuner.report import trials_text

    if as_csv and as_json:
        raise ConfigError("--csv and --json: choose one; fix: pass only --csv or only --json")
    study = _study(space_path, storage, study_name, emulate)
    text = trials_text(study, "json" if as_json else "csv")
    if out is None:
        sys.stdout.write(text)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}", file=sys.stderr)
