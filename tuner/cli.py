"""The ``tuner`` command line (typer). Exit codes: 0 success, 2 bad input, 1 a failure while running.

Each command is a thin layer: it validates its input once, then calls the module that does the
work. Errors are one line on stderr, ``tuner: error: <where>: <what>; fix: <how>``: the tuner's
own and click's alike (:mod:`tuner.cli_errors`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console

from tuner import __version__
from tuner.cli_errors import error_line, is_usage_error, usage_line
from tuner.errors import ConfigError, TunerError
from tuner.interrupts import stop_cleanly
from tuner.study.strategies import DEFAULT_STRATEGY

__all__ = ["app", "main"]

# One help style for every command: typer's panels, the text as written (no rich markup, so
# ``[user@]`` stays), ``-h`` as well as ``--help``; ``--install-completion`` for the shell.
app = typer.Typer(
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    rich_markup_mode=None,
    help="Bayesian launch-configuration optimizer for LLM inference servers (SGLang, vLLM).",
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"tuner {__version__}")
        raise typer.Exit(0)


@app.callback(invoke_without_command=True)
def _root(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="print the version and exit"
        ),
    ] = False,
) -> None:
    """Bayesian launch-configuration optimizer for LLM inference servers (SGLang, vLLM)."""
    if ctx.invoked_subcommand is None:  # bare `tuner`: the help, and success
        typer.echo(ctx.get_help())
        raise typer.Exit(0)


from tuner.cli_options import (  # noqa: E402
    ClientWorkersOpt,
    EmulateOpt,
    HostOptions,
    PortOpt,
    SamplerName,
    SpaceArg,
    StorageOpt,
    StrategyName,
    StudyOpt,
    storage_and_name,
    with_host_options,
)


def _console() -> Console:
    return Console(stderr=True, soft_wrap=True)


def _load(space_path: Path):  # noqa: ANN202 (SearchSpace, imported late for a fast --help)
    from tuner.space import load_space

    return load_space(space_path)


@app.command()
@with_host_options
def optimize(
    space_path: SpaceArg,
    trials: Annotated[
        int, typer.Option("--trials", min=1, help="configurations to run on the host")
    ] = 40,
    storage: StorageOpt = None,
    study_name: StudyOpt = None,
    strategy: Annotated[
        Optional[StrategyName],
        typer.Option(
            "--strategy", help=f"how the next configuration is chosen (default {DEFAULT_STRATEGY})"
        ),
    ] = None,
    sampler: Annotated[
        Optional[SamplerName],
        typer.Option("--sampler", help="older option: a strategy, or an Optuna sampler alone"),
    ] = None,
    seed: Annotated[Optional[int], typer.Option("--seed", help="sampler seed")] = None,
    emulate: EmulateOpt = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print what would run and an estimate of host hours")
    ] = False,
    allow_changed: Annotated[
        bool, typer.Option("--allow-changed", help="resume although the space or workload changed")
    ] = False,
    skip_doctor: Annotated[
        bool, typer.Option("--skip-doctor", help="do not run the preflight checks")
    ] = False,
    on: HostOptions = HostOptions(),
    heartbeat_seconds: Annotated[
        Optional[int],
        typer.Option(
            "--heartbeat-seconds",
            min=1,
            help="send a heartbeat this often; a trial silent for 3x as long is FAIL worker-died and runs again",
        ),
    ] = None,
    warm_start: Annotated[
        Optional[str],
        typer.Option(
            "--warm-start",
            help="queue the best stable configurations of an earlier study (a .db file or URL)",
        ),
    ] = None,
    no_feasibility: Annotated[
        bool,
        typer.Option(
            "--no-feasibility",
            help="run sampled configurations even when they look like ones that crashed",
        ),
    ] = False,
    client_workers: ClientWorkersOpt = 1,
    from_study: Annotated[
        Optional[str],
        typer.Option(
            "--from-study",
            help="after an engine upgrade: seed from this study of the same storage (its recheck's figures, its ranking)",
        ),
    ] = None,
) -> None:
    """Run or resume the study: the baseline first, then sampled configurations."""
    from tuner.recheck import UpgradeStart
    from tuner.study.loop import OptimizeOptions, run_optimize
    from tuner.study.strategies import resolve_strategy
    from tuner.study.strategies import Strategy
    from tuner.cli_flags import check_flags_known

    strategy = strategy.value if strategy is not None else None
    sampler = sampler.value if sampler is not None else None
    space = _load(space_path)
    chosen = resolve_strategy(strategy, sampler, space, seed)  # validate before any host work
    requests = _requests(space, emulate)  # a bad dataset: exit 2 here
    check_flags_known(
        space, emulate
    )  # a flag the engine's recorded list lacks: exit 2, --dry-run too
    url, name = storage_and_name(space, storage, study_name, emulate)
    if dry_run:
        from tuner.study.loop import print_dry_run

        proposes = chosen.name if type(chosen).propose is not Strategy.propose else None
        print_dry_run(space, trials, chosen.sampler(), emulate, Console(), proposes)
        return
    target = on.target(space, emulate)
    target.client_workers = client_workers
    try:
        options = OptimizeOptions(
            trials=trials,
            storage=url,
            study_name=name,
            strategy=strategy,
            sampler=sampler,
            seed=seed,
            emulate=emulate,
            allow_changed=allow_changed,
            skip_doctor=skip_doctor,
            heartbeat_s=heartbeat_seconds,
            warm_start=warm_start,
            feasibility=not no_feasibility,
            requests=requests,
            upgrade=UpgradeStart(url, from_study),
        )
        run_optimize(space, target, options, _console())
    finally:
        target.close()
    Console().print(f"study {name} in {url}; see it with: optuna-dashboard {url}")


def _requests(space, emulate: bool):  # noqa: ANN001, ANN202 (SearchSpace, RequestSource)
    """The workload's request source; a dataset file that cannot be read names
    ``workload.dataset`` and its line in the space."""
    from tuner.study.trial import request_source

    try:
        return request_source(space.workload_for(emulate), space.path)
    except ConfigError as error:
        line = space.document.line_of(("workload", "dataset", "path"))
        where = f"{space.path}:{line}" if line else str(space.path)
        raise ConfigError(f"{where}: workload.dataset.path: {error}") from None


@app.command()
def export(
    space_path: SpaceArg,
    out: Annotated[Path, typer.Option("--out", help="where to write the launch script")],
    storage: StorageOpt = None,
    study_name: StudyOpt = None,
    emulate: EmulateOpt = False,
    trial: Annotated[
        Optional[int], typer.Option("--trial", help="export this trial instead of the best")
    ] = None,
    at: AtOpt = None,
    port: PortOpt = None,
) -> None:
    """Write a runnable bash script for the best stable trial (--at C: the best at that level)."""
    from tuner.export import write_launch_script
    from tuner.study.storage import load_existing_study

    space = _load(space_path)
    url, name = storage_and_name(space, storage, study_name, emulate)
    study = load_existing_study(url, name)
    if at is not None and trial is not None:
        raise ConfigError("--at and --trial both name the trial to export; fix: give one of them")
    if at is not None:
        trial = best_trial_at(space, study, at).trial.number
    path = write_launch_script(space, study, out, trial_number=trial, port=port)
    Console().print(f"wrote {path}")


@app.command()
@with_host_options
def doctor(
    space_path: SpaceArg,
    emulate: EmulateOpt = False,
    on: HostOptions = HostOptions(),
) -> None:
    """Preflight checks of the host: SSH, versions, GPUs, flags, port, disk, patches."""
    from tuner.doctor import format_checks
    from tuner.study.loop import preflight_checks
    from tuner.study.loop import patch_manager

    space = _load(space_path)
    target = on.target(space, emulate)
    try:
        checks = preflight_checks(space, target, patch_manager(space, target))
    finally:
        target.close()
    Console().print(format_checks(checks))
    if not all(c.ok for c in checks):
        raise TunerError(f"{sum(not c.ok for c in checks)} check(s) failed")


@app.command()
def enqueue(
    space_path: SpaceArg,
    assignments: Annotated[
        list[str], typer.Option("--set", help="name=value (YAML scalar; null = unset)")
    ],
    storage: StorageOpt = None,
    study_name: StudyOpt = None,
    emulate: EmulateOpt = False,
) -> None:
    """Queue a configuration by hand: the baseline with --set changes; runs before sampled ones."""
    from tuner.study.loop import configuration_with, enqueue_configuration, parse_assignments
    from tuner.study.loop import ensure_baseline_queued
    from tuner.study.loop import study_directions, study_pruner
    from tuner.study.storage import create_or_resume, open_storage
    from tuner.study.strategies import make_sampler

    space = _load(space_path)
    config = configuration_with(space, parse_assignments(assignments))
    url, name = storage_and_name(space, storage, study_name, emulate)
    study = create_or_resume(
        open_storage(url),
        name,
        space.fingerprint(),
        sampler=make_sampler("tpe", None),
        pruner=study_pruner(space, emulate),
        directions=study_directions(space),
        allow_changed=False,
        attrs={},
    )
    ensure_baseline_queued(study, space)  # the baseline always runs first
    enqueue_configuration(study, space, config)
    Console().print(f"queued in {name}: {config.describe()}", highlight=False)


@app.command()
@with_host_options
def validate(
    space_path: SpaceArg,
    storage: StorageOpt = None,
    study_name: StudyOpt = None,
    emulate: EmulateOpt = False,
    top: Annotated[
        int, typer.Option("--top", min=1, help="how many of the best stable trials")
    ] = 3,
    duration: Annotated[
        Optional[float],
        typer.Option(
            "--duration", min=1, help="soak host seconds per configuration (default 600)"
        ),
    ] = None,
    repeats: Annotated[
        int, typer.Option("--repeats", min=2, help="measurements per soak, for the spread")
    ] = 3,
    on: HostOptions = HostOptions(),
) -> None:
    """Soak the best configurations at their peak concurrency; unstable ones are never exported."""
    from tuner.study.loop import patch_manager
    from tuner.study.storage import load_existing_study
    from tuner.study.loop import DEFAULT_SOAK_S, validate_study

    space = _load(space_path)
    if space.objective.metric == "goodput":
        raise ConfigError(
            f"{space_path}: objective.metric goodput: validate soaks at a concurrency, "
            "not yet at a request rate; fix: compare goodput trials with `tuner trials`"
        )
    url, name = storage_and_name(space, storage, study_name, emulate)
    study = load_existing_study(url, name)
    target = on.target(space, emulate)
    try:
        results = validate_study(
            space,
            study,
            target,
            patch_manager(space, target),
            top=top,
            duration_s=duration or DEFAULT_SOAK_S,
            repeats=repeats,
            console=_console(),
        )
    finally:
        target.close()
    if not any(r.stable for r in results):
        raise TunerError("no configuration survived the soak")


@app.command()
def dashboard(
    space_path: SpaceArg,
    storage: StorageOpt = None,
    emulate: EmulateOpt = False,
    port: Annotated[int, typer.Option("--port", help="dashboard port on 127.0.0.1")] = 8080,
) -> None:
    """Open the study in optuna-dashboard (on 127.0.0.1; the storage URL worked out for you)."""
    import os
    import shutil

    space = _load(space_path)
    url, _ = storage_and_name(space, storage, None, emulate)
    from tuner.study.storage import storage_file

    path = storage_file(url)
    if path is not None and not path.is_file():
        raise ConfigError(f"no study database at {path}; fix: run `tuner optimize` first")
    program = shutil.which("optuna-dashboard")
    if program is None:
        raise ConfigError("optuna-dashboard is not installed; fix: pip install optuna-dashboard")
    Console(stderr=True).print(
        f"optuna-dashboard {url} on http://127.0.0.1:{port}/", highlight=False
    )
    os.execv(program, [program, url, "--host", "127.0.0.1", "--port", str(port)])


from tuner.cli_bench import bench  # noqa: E402 (commands written in their own modules)
from tuner.cli_best import AtOpt, best, best_trial_at  # noqa: E402
from tuner.cli_init import INIT_SETTINGS, init  # noqa: E402
from tuner.cli_report import report, trials  # noqa: E402
from tuner.cli_recheck import recheck  # noqa: E402

app.command("bench")(bench)
app.command("init", context_settings=INIT_SETTINGS)(init)
app.command("best")(best)
app.command("report")(report)
app.command("trials")(trials)
app.command("recheck")(recheck)


def _quiet_optuna() -> None:
    """Optuna's own INFO lines and experimental-feature warnings would drown the progress."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def main() -> None:
    """Entry point: run the app and turn tuner errors into one line and an exit code."""
    _quiet_optuna()
    with stop_cleanly() as interrupts:  # SIGTERM like Ctrl-C; pressed again, the clean-up goes on
        code = _run_app()
    if code == 130 and not interrupts.abandoned:  # typer turns Ctrl-C into exit code 130
        print("tuner: interrupted; the server was stopped and patches reverted", file=sys.stderr)
    sys.exit(code)


def _run_app() -> int:
    """Run the command: its exit code (130 after Ctrl-C); errors end the process with theirs."""
    try:
        code = app(standalone_mode=False, prog_name="tuner")
    except TunerError as error:
        print(error_line(str(error)), file=sys.stderr)
        sys.exit(error.exit_code)
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        if type(error).__name__ == "Abort":  # click's Ctrl-C at a prompt
            return 130
        if not is_usage_error(error):
            raise
        print(usage_line(error), file=sys.stderr)  # a mistake in the command line: exit 2
        sys.exit(error.exit_code)  # type: ignore[attr-defined]
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    main()
