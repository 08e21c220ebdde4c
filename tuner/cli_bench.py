"""``tuner bench URL``: benchmark a server that is already running, with the study's own client.

The lead's typer app registers it with ``app.command("bench")(bench)``. A table by default;
``--json`` prints one document ``{"url", "emulated", "time_scale", "levels": [...]}`` whose
levels hold :meth:`LevelMetrics.to_dict` keys (``output_throughput``, ``median_ttft_ms``, ...).
Errors are one line on stderr and a non-zero exit (2 for a bad option, 1 for a server that does
not answer or fails); whatever was measured before is still printed.

An OpenAI server's model is named by ``--model``, else by ``GET /v1/models``; one that names none
(``transformers serve``) stops the command with a one-line error asking for ``--model`` (exit 2).
``--strict`` speaks to a server that takes no extension of the OpenAI API: no ``ignore_eos``,
prompts as text of about the asked length, usage read from its last event; replies that end
before the asked length are counted (``short_replies``), never taken as full.
"""

from __future__ import annotations

import json
import os
import re
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from tuner.cli_options import ClientWorkersOpt
from tuner.errors import ConfigError, TunerError
from tuner.loadgen import (
    APIS,
    Dialect,
    LevelMetrics,
    LevelSpec,
    auth_headers,
    fetch_model_name,
    fetch_time_scale,
    run_levels,
)

__all__ = ["bench", "parse_concurrency"]

TABLE_WIDTH = 170
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")  # --api-key '${NAME}'


def parse_concurrency(text: str) -> list[int]:
    """``"64,256,1024"`` -> ``[64, 256, 1024]``; anything else is a ``typer.BadParameter``."""
    try:
        levels = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        levels = []
    if not levels or min(levels) < 1:
        raise typer.BadParameter(
            f"{text!r} is not a list of positive integers: use e.g. 64,256,1024",
            param_hint="'--concurrency'",
        )
    return levels


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _table(url: str, levels: list[LevelMetrics]) -> Table:
    emulated = any(level.emulated for level in levels)
    title = f"tuner bench {url}"
    if emulated:
        title += f" (emulated, host time: K={levels[0].time_scale:g})"
    table = Table(title=title, caption="latencies in ms (p50 = median); peak = best 1 s")
    for header in (
        "concurrency",
        "done",
        "failed",
        "out tok/s",
        "total tok/s",
        "req/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "ITL p50",
        "e2e p50",
        "peak tok/s",
        "stopped",
    ):
        table.add_column(header, justify="left" if header == "stopped" else "right")
    for level in levels:
        table.add_row(
            str(level.concurrency),
            str(level.completed),
            str(level.failed),
            f"{level.output_throughput:,.1f}",
            f"{level.total_throughput:,.1f}",
            f"{level.request_throughput:,.2f}",
            _ms(level.median_ttft_ms),
            _ms(level.p99_ttft_ms),
            _ms(level.median_tpot_ms),
            _ms(level.median_itl_ms),
            _ms(level.median_e2e_ms),
            f"{level.max_output_tokens_per_s:,.0f}",
            level.stop_reason or "",
        )
    return table


def _api_key(value: str | None) -> str | None:
    """``--api-key``'s key: the value, or the environment variable it names as ``${NAME}``
    (so that the key shows on no command line); an unset variable is a bad option (exit 2)."""
    if value is None:
        return None
    match = _VARIABLE.fullmatch(value)
    if match is None:
        return value
    key = os.environ.get(match.group(1))
    if not key:
        raise _fail(f"--api-key: ${{{match.group(1)}}} is not set in the environment; fix: "
                    f"export {match.group(1)}=... (the server's --api-key) before running "
                    "tuner bench", 2)
    return key


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(code)


def bench(
    url: Annotated[str, typer.Argument(help="The running server, e.g. http://127.0.0.1:30000")],
    concurrency: Annotated[
        str, typer.Option(help="Comma-separated concurrency levels, run in order.")
    ] = "64,256,1024",
    num_prompts: Annotated[
        int | None,
        typer.Option(min=1, help="Requests per level (default: 2 x concurrency, at least 128)."),
    ] = None,
    input_len: Annotated[int, typer.Option(min=1, help="Prompt tokens per request.")] = 256,
    output_len: Annotated[int, typer.Option(min=1, help="Output tokens per request.")] = 256,
    api: Annotated[str, typer.Option(help="Request format: " + ", ".join(APIS) + ".")] = "sglang",
    model: Annotated[
        str | None,
        typer.Option(help="The model's name in OpenAI requests (default: the first of GET "
                     "/v1/models); transformers serve takes the path it was started with."),
    ] = None,
    strict: Annotated[
        bool,
        typer.Option("--strict", help="The server takes no extension of the OpenAI API "
                     "(transformers serve): no ignore_eos, text prompts of about --input-len "
                     "tokens, replies that end early counted as short."),
    ] = False,
    request_rate: Annotated[
        float | None, typer.Option(help="Requests/s (open loop, capped by the concurrency); default: closed loop.")
    ] = None,
    arrival: Annotated[str, typer.Option(help="Arrivals at a request rate: poisson or constant.")] = "poisson",
    warmup: Annotated[int, typer.Option(min=0, help="Warm-up requests before each level.")] = 1,
    time_limit: Annotated[float, typer.Option(help="Seconds a level may last at most.")] = 600.0,
    dataset: Annotated[
        str | None,
        typer.Option(help="Dataset file, by its content: ShareGPT JSON, or JSONL of "
                     '{"prompt", "output_len"} or of chat {"messages"}.'),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of prompts and arrival times.")] = 0,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print one JSON document instead of a table.")
    ] = False,
    client_workers: ClientWorkersOpt = 1,
    api_key: Annotated[
        str | None,
        typer.Option(help="The server's --api-key, sent as Authorization: Bearer; write "
                     "'${NAME}' (quoted) to read it from the environment variable NAME."),
    ] = None,
) -> None:
    """Benchmark a running server at several concurrency levels (same client as the study)."""
    levels = parse_concurrency(concurrency)
    headers = auth_headers(_api_key(api_key))
    if api not in APIS:
        raise typer.BadParameter(f"{api!r} is not one of {', '.join(APIS)}", param_hint="'--api'")
    try:
        source = None
        if dataset is not None:
            from tuner.loadgen import load_file_pool

            source = load_file_pool(dataset, default_output_len=output_len)  # read once, streamed
            typer.echo(f"dataset: {source.describe()}", err=True)
        specs: list[LevelSpec] = []
        for level in levels:  # each level after the ones before it: no prompt sent twice
            specs.append(LevelSpec(
                concurrency=level,
                num_requests=num_prompts or max(2 * level, 128),
                input_len=input_len,
                output_len=output_len,
                time_limit_s=time_limit,
                request_rate=request_rate,
                arrival=arrival,
                warmup=warmup,
                seed=seed,
                dataset=source,
                first_request=sum(spec.num_requests for spec in specs),
            ))
    except ConfigError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    try:
        scale = fetch_time_scale(url, headers=headers)
    except TunerError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    if api != "sglang" and model is None:
        try:
            model = fetch_model_name(url, headers=headers)
        except TunerError as exc:  # the server names no model: the user gives it (bad input)
            raise _fail(str(exc), ConfigError.exit_code) from None
    dialect = Dialect(api, model, frozenset() if strict else Dialect().extensions)

    console = Console(stderr=True)

    def report(level: LevelMetrics) -> None:
        if not json_output:
            rate = (f", {level.achieved_request_rate:,.2f} req/s sent of {level.request_rate:g} asked"
                    if level.achieved_request_rate is not None else "")
            console.print(
                f"concurrency {level.concurrency}: {level.output_throughput:,.1f} output tok/s, "
                f"{level.completed} done, {level.failed} failed{rate}"
                + (" (input tokens estimated)" if level.input_tokens_estimated else "")
                + (f"; {level.short_replies} replies ended before {output_len} tokens"
                   if level.short_replies else "")
                + (f", {level.repeated_prompts} prompts repeated (the dataset's sample ran out)"
                   if level.repeated_prompts else "")
            )
            if level.measurement_bound:
                seen = f" ({level.in_flight:,.0f} of {level.concurrency} in flight)" if level.in_flight is not None else ""
                console.print(f"  measurement-bound{seen}: {level.measurement_bound}")

    measured = run_levels(
        url, specs, api=dialect, on_level=report, time_scale=scale, client_workers=client_workers,
        headers=headers,
    )
    stopped = next((level for level in measured if level.stop_reason), None)
    error = f"level {stopped.concurrency} stopped: {stopped.stop_reason}" if stopped else None
    if json_output:
        document = {
            "url": url,
            "emulated": scale.emulated,
            "time_scale": scale.factor,
            "levels": [level.to_dict() for level in measured],
        }
        if error:
            document["error"] = error
        typer.echo(json.dumps(document, indent=2))
    else:
        console_out = Console()
        if not console_out.is_terminal:
            console_out = Console(width=TABLE_WIDTH)  # not a terminal: do not cut columns
        console_out.print(_table(url, measured))
        from tuner.study.record import trial_figure  # the study's one rule, as it ranks a trial

        figure = trial_figure([level.to_dict() for level in measured])
        if figure.value is not None:
            console_out.print(f"figure (as a study ranks it): {figure.value:,.1f} output tok/s at "
                              f"c={figure.concurrency}" + (", a lower bound: the client fell behind"
                                                           if figure.bound else ""))
    if error:
        raise _fail(error, 1)
