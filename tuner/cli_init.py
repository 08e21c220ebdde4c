"""``tuner init [--host H] [--out FILE] [--emulate] -- COMMAND...``: a search space from the
command the user runs today (``tuner/init``). ``tuner/cli.py`` registers it with
``app.command("init", context_settings=INIT_SETTINGS)(init)``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from tuner.cli_options import AcceptKeyOpt, EmulateOpt, HostOpt, KeyOpt, KnownHostsOpt

__all__ = ["INIT_SETTINGS", "init"]

# The words after `--` are the user's command, passed through as they are.
INIT_SETTINGS = {"allow_extra_args": True, "ignore_unknown_options": True}


def init(
    ctx: typer.Context,
    out: Annotated[
        Path | None, typer.Option("--out", help="where to write the space (default: <model>.yaml)")
    ] = None,
    host: HostOpt = None,
    ssh_key: KeyOpt = None,
    known_hosts: KnownHostsOpt = None,
    accept_new_host_key: AcceptKeyOpt = False,
    emulate: EmulateOpt = False,
    levels: Annotated[
        str | None,
        typer.Option(
            "--levels",
            help="concurrency levels, e.g. 64,256,1024 (default: your command's cap and 4x it)",
        ),
    ] = None,
    input_len: Annotated[
        int, typer.Option("--input-len", min=1, help="prompt tokens per request")
    ] = 256,
    output_len: Annotated[
        int, typer.Option("--output-len", min=1, help="output tokens per request")
    ] = 256,
    dataset: Annotated[
        str | None, typer.Option("--dataset", help="your traffic (see README)")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="replace --out if it exists")] = False,
) -> None:
    """Write a search space from the command you run today: tuner init -- COMMAND..."""
    from tuner.errors import ConfigError
    from tuner.init import InitOptions, init_space

    words = list(ctx.args)
    if not words:
        raise ConfigError(
            "tuner init: no command; fix: tuner init -- <the command that starts your server>"
        )
    result = init_space(
        words,
        InitOptions(
            out=out,
            host=host,
            ssh_key=ssh_key,
            known_hosts=known_hosts,
            accept_new_host_key=accept_new_host_key,
            emulate=emulate,
            levels=levels,
            input_len=input_len,
            output_len=output_len,
            dataset=dataset,
            force=force,
        ),
    )
    console = Console(stderr=True, soft_wrap=True, highlight=False)
    facts = result.facts
    console.print(
        escape(
            f"read {facts.where}: {result.command.engine} {facts.engine_version or '(version not read)'}, "
            f"{facts.gpu_count} GPU(s), model: "
            f"{facts.model.describe() if facts.model else 'config.json not read'}"
        )
    )
    for note in result.notes:
        console.print(escape(f"note: {note.line()}"))
    names = ", ".join(p.name for p in result.plan.params)
    console.print(
        escape(
            f"wrote {result.path}: {len(result.plan.params)} parameters ({names}); "
            f"the baseline is your command"
        )
    )
    flag = " --emulate" if emulate else ""
    Console(highlight=False).print(
        escape(
            f"next: tuner optimize {result.path} --dry-run{flag}; "
            f"tuner optimize {result.path}{flag}; tuner export {result.path} --out launch.sh{flag}"
        )
    )
