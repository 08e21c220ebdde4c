"""``tuner recheck``: after an engine upgrade, does the study's winner still win?

Registered on the app at the end of :mod:`tuner.cli`, as the other commands in their own modules.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from tuner.cli_options import (
    EmulateOpt,
    HostOptions,
    SpaceArg,
    StorageOpt,
    StudyOpt,
    storage_and_name,
    with_host_options,
)

__all__ = ["recheck"]


@with_host_options
def recheck(
    space_path: SpaceArg,
    top: Annotated[
        int,
        typer.Option(
            "--top", min=1, help="the winner and the next K-1 distinct stable configurations"
        ),
    ] = 2,
    runs: Annotated[
        int, typer.Option("--runs", min=1, help="fresh server starts of each, interleaved")
    ] = 2,
    storage: StorageOpt = None,
    study_name: StudyOpt = None,
    emulate: EmulateOpt = False,
    skip_doctor: Annotated[
        bool, typer.Option("--skip-doctor", help="do not run the preflight checks")
    ] = False,
    on: HostOptions = HostOptions(),  # noqa: B008 (the five host options, as in tuner.cli)
) -> None:
    """Re-measure the baseline, the exported winner and the next configurations on the engine
    installed now; say whether the winner still wins (runs kept in <study>-recheck-<version>)."""
    from tuner.recheck import RecheckOptions, plan_recheck, run_recheck
    from tuner.space import load_space

    space = load_space(space_path)
    url, name = storage_and_name(space, storage, study_name, emulate)
    shown = " ".join(
        [*([f"--storage {storage}"] if storage else []), *(["--emulate"] if emulate else [])]
    )
    options = RecheckOptions(
        storage=url,
        study_name=name,
        top=top,
        runs=runs,
        emulate=emulate,
        skip_doctor=skip_doctor,
        shown_options=shown,
    )
    plan_recheck(space, options)  # nothing to recheck: one line, exit 2, before the host is opened
    target = on.target(space, emulate)
    try:
        run_recheck(space, target, options, Console(stderr=True, soft_wrap=True))
    finally:
        target.close()
