"""``tuner bench URL``: benchmark a server that is already running, with the study's own client.

The lead's typer app registers it with ``app.command("bench")(bench)``. A table by default;
``--json`` prints one document ``{"url", "emulated", "time_scale", "levels": [...]}`` whose
levels hold :meth:`LevelMetrics.to_dict` keys (``output_throughput``, ``median_ttft_ms``, ...).
Errors are one line on stderr, ``tuner: error: <where>: <what>; fix: <how>``, and a non-zero exit
(2 for a bad option, before any request; 1 for a server that does not answer or fails); whatever
was measured before is still printed. ``--save-result FILE`` keeps the run with what produced it
(:mod:`tuner.cli_bench_result`); the options and JSON keys of ``vllm bench serve`` are accepted
where they mean the same (``--max-concurrency``, ``--random-input-len``, ``--backend``,
``--dataset-path``, ``--num-warmups``, ``--result-dir``/``--result-filename``, ``--percentile-metrics``,
``--metric-percentiles``, ``--disable-tqdm``).

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
from pathlib import Path
from typing import Annotated
from urllib.parse import urlparse

import typer
from rich.console import Console
from rich.table import Table

from tuner.cli_bench_result import (
    LevelProgress,
    RunFacts,
    parse_metric_percentiles,
    parse_percentile_metrics,
    result_document,
    save_result,
)
from tuner.cli_errors import error_line
from tuner.cli_options import Api, Arrival, ClientWorkersOpt
from tuner.errors import ConfigError, TunerError
from tuner.loadgen import (
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
DEFAULT_API, DEFAULT_ARRIVAL = Api("sglang"), Arrival("poisson")
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


_LABELS = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "e2e"}


def _latency(level: LevelMetrics, kind: str, percentile: float) -> float | None:
    from tuner.loadgen import percentile_name

    if percentile == 50:
        return getattr(level, f"median_{kind}_ms")
    key = percentile_name(percentile, kind)
    return level.percentiles.get(key, getattr(level, key.replace(".", "_"), None))


def _table(
    url: str,
    levels: list[LevelMetrics],
    kinds: tuple[str, ...] = ("ttft", "tpot", "itl"),
    percentiles: tuple[float, ...] = (99.0,),
) -> Table:
    emulated = any(level.emulated for level in levels)
    title = f"tuner bench {url}"
    if emulated:
        title += f" (emulated, host time: K={levels[0].time_scale:g})"
    table = Table(title=title, caption="latencies in ms (p50 = median); peak = best 1 s")
    shown = [(kind, q) for kind in kinds for q in dict.fromkeys((50.0, *percentiles))]
    headers = [
        "concurrency",
        "done",
        "failed",
        "out tok/s",
        "total tok/s",
        "req/s",
        *(f"{_LABELS[kind]} p{q:g}" for kind, q in shown),
        "peak tok/s",
        "stopped",
    ]
    for header in headers:
        table.add_column(header, justify="left" if header == "stopped" else "right")
    for level in levels:
        table.add_row(
            str(level.concurrency),
            str(level.completed),
            str(level.failed),
            f"{level.output_throughput:,.1f}",
            f"{level.total_throughput:,.1f}",
            f"{level.request_throughput:,.2f}",
            *(_ms(_latency(level, kind, q)) for kind, q in shown),
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
        raise _fail(
            f"--api-key: ${{{match.group(1)}}} is not set in the environment; fix: "
            f"export {match.group(1)}=... (the server's --api-key) before running "
            "tuner bench",
            2,
        )
    return key


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(error_line(message), err=True)
    return typer.Exit(code)


def _check_url(url: str) -> None:
    """An http(s) URL with a host, else a bad argument (exit 2, before any request)."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ConfigError(
            f"URL {url}: not an http(s) address; fix: give the running server's "
            "address, e.g. http://127.0.0.1:30000"
        )


def bench(
    url: Annotated[
        str,
        typer.Argument(
            metavar="URL",
            show_default=False,
            help="the running server, e.g. http://127.0.0.1:30000",
        ),
    ],
    concurrency: Annotated[
        str,
        typer.Option(
            "--concurrency",
            "--max-concurrency",
            help="comma-separated concurrency levels, run in order",
        ),
    ] = "64,256,1024",
    num_prompts: Annotated[
        int | None,
        typer.Option(
            "--num-prompts",
            min=1,
            help="requests per level (default: 2 x concurrency, at least 128)",
        ),
    ] = None,
    input_len: Annotated[
        int,
        typer.Option("--input-len", "--random-input-len", min=1, help="prompt tokens per request"),
    ] = 256,
    output_len: Annotated[
        int,
        typer.Option(
            "--output-len", "--random-output-len", min=1, help="output tokens per request"
        ),
    ] = 256,
    api: Annotated[Api, typer.Option("--api", "--backend", help="request format")] = DEFAULT_API,
    model: Annotated[
        str | None,
        typer.Option(
            "--model",
            help="the model's name in OpenAI requests (default: the first of GET "
            "/v1/models); transformers serve takes the path it was started with",
        ),
    ] = None,
    strict: Annotated[
        bool,
        typer.Option(
            "--strict",
            help="the server takes no extension of the OpenAI API (transformers serve): "
            "no ignore_eos, text prompts of about --input-len tokens, replies that end early "
            "counted as short",
        ),
    ] = False,
    request_rate: Annotated[
        float | None,
        typer.Option(
            "--request-rate",
            help="requests/s (open loop, capped by the concurrency); default: closed loop",
        ),
    ] = None,
    arrival: Annotated[
        Arrival, typer.Option("--arrival", help="arrivals at a request rate")
    ] = DEFAULT_ARRIVAL,
    warmup: Annotated[
        int,
        typer.Option(
            "--warmup", "--num-warmups", min=0, help="warm-up requests before each level"
        ),
    ] = 1,
    time_limit: Annotated[
        float, typer.Option("--time-limit", help="seconds a level may last at most (above 0)")
    ] = 600.0,
    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset",
            "--dataset-path",
            help="dataset file, by its content: ShareGPT JSON, or "
            'JSONL of {"prompt", "output_len"} or of chat {"messages"}',
        ),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="seed of prompts and arrival times")] = 0,
    json_output: Annotated[
        bool, typer.Option("--json", help="print one JSON document instead of a table")
    ] = False,
    save: Annotated[
        Path | None,
        typer.Option(
            "--save-result",
            metavar="FILE",
            help="also write the run to FILE as JSON: date, URL, model, API, lengths, dataset, "
            "seed, tuner version and every level",
        ),
    ] = None,
    result_filename: Annotated[
        str | None,
        typer.Option(
            "--result-filename",
            metavar="NAME",
            help="as in vllm bench serve: write the run to NAME in --result-dir",
        ),
    ] = None,
    result_dir: Annotated[
        Path, typer.Option("--result-dir", metavar="DIR", help="the folder of --result-filename")
    ] = Path("."),
    percentile_metrics: Annotated[
        str,
        typer.Option(
            "--percentile-metrics",
            help="latencies whose percentiles are reported: ttft, tpot, itl, e2el",
        ),
    ] = "ttft,tpot,itl",
    metric_percentiles: Annotated[
        str,
        typer.Option(
            "--metric-percentiles",
            help="the percentiles reported, e.g. 50,90,99 (keys p50_ttft_ms, ...)",
        ),
    ] = "99",
    no_progress: Annotated[
        bool,
        typer.Option("--no-progress", "--disable-tqdm", help="no progress bar while a level runs"),
    ] = False,
    client_workers: ClientWorkersOpt = 1,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            help="the server's --api-key, sent as Authorization: Bearer; write "
            "'${NAME}' (quoted) to read it from the environment variable NAME",
        ),
    ] = None,
) -> None:
    """Benchmark a running server at several concurrency levels (same client as the study)."""
    levels = parse_concurrency(concurrency)
    headers = auth_headers(_api_key(api_key))
    api_name, arrival_name = api.value, arrival.value
    try:
        if save is not None and result_filename is not None:
            raise ConfigError(
                "--save-result with --result-filename: both name the result file; "
                "fix: give one of them"
            )
        if result_filename is not None:
            save = result_dir / result_filename
        _check_url(url)
        if not time_limit > 0:
            raise ConfigError(
                f"--time-limit {time_limit:g}: not above 0 seconds; fix: give the "
                "seconds a level may last, e.g. --time-limit 600"
            )
        if request_rate is not None and not request_rate > 0:
            raise ConfigError(
                f"--request-rate {request_rate:g}: not above 0 requests/s; fix: "
                "leave it out for a closed loop"
            )
        kinds = parse_percentile_metrics(percentile_metrics)
        percentiles = parse_metric_percentiles(metric_percentiles)
        source = None
        if dataset is not None:
            from tuner.loadgen import load_file_pool

            try:
                source = load_file_pool(dataset, default_output_len=output_len)  # read once
            except ConfigError as exc:
                raise ConfigError(f"--dataset {exc}") from None
            typer.echo(f"dataset: {source.describe()}", err=True)
        specs: list[LevelSpec] = []
        for level in levels:  # each level after the ones before it: no prompt sent twice
            specs.append(
                LevelSpec(
                    concurrency=level,
                    num_requests=num_prompts or max(2 * level, 128),
                    input_len=input_len,
                    output_len=output_len,
                    time_limit_s=time_limit,
                    request_rate=request_rate,
                    arrival=arrival_name,
                    warmup=warmup,
                    seed=seed,
                    dataset=source,
                    first_request=sum(spec.num_requests for spec in specs),
                    percentiles=percentiles,
                )
            )
    except ConfigError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    try:
        scale = fetch_time_scale(url, headers=headers)
    except TunerError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    if api_name != "sglang" and model is None:
        try:
            model = fetch_model_name(url, headers=headers)
        except TunerError as exc:  # the server names no model: the user gives it (bad input)
            raise _fail(str(exc), ConfigError.exit_code) from None
    dialect = Dialect(api_name, model, frozenset() if strict else Dialect().extensions)

    console = Console(stderr=True)

    def report(level: LevelMetrics) -> None:
        progress.level_done(level)
        if not json_output:
            rate = (
                f", {level.achieved_request_rate:,.2f} req/s sent of {level.request_rate:g} asked"
                if level.achieved_request_rate is not None
                else ""
            )
            console.print(
                f"concurrency {level.concurrency}: {level.output_throughput:,.1f} output tok/s, "
                f"{level.completed} done, {level.failed} failed{rate}"
                + (" (input tokens estimated)" if level.input_tokens_estimated else "")
                + (
                    f"; {level.short_replies} replies ended before {output_len} tokens"
                    if level.short_replies
                    else ""
                )
                + (
                    f", {level.repeated_prompts} prompts repeated (the dataset's sample ran out)"
                    if level.repeated_prompts
                    else ""
                ),
                highlight=False,
            )
            if level.measurement_bound:
                seen = (
                    f" ({level.in_flight:,.0f} of {level.concurrency} in flight)"
                    if level.in_flight is not None
                    else ""
                )
                console.print(
                    f"  measurement-bound{seen}: {level.measurement_bound}", highlight=False
                )

    with LevelProgress(console, console.is_terminal and not no_progress, scale.rate) as progress:
        measured = run_levels(
            url,
            specs,
            api=dialect,
            on_level=report,
            time_scale=scale,
            client_workers=client_workers,
            headers=headers,
            on_progress=progress.update,
        )
    stopped = next((level for level in measured if level.stop_reason), None)
    error = f"level {stopped.concurrency} stopped: {stopped.stop_reason}" if stopped else None
    facts = RunFacts(
        url=url,
        api=api_name,
        model=model,
        input_len=input_len,
        output_len=output_len,
        dataset=dataset,
        seed=seed,
        request_rate=request_rate,
        arrival=arrival_name,
        emulated=scale.emulated,
        time_scale=scale.factor,
    )
    document = result_document(facts, measured, kinds, error)
    if save is not None:
        save_result(save, document)
        console.print(f"saved the run to {save}", highlight=False, soft_wrap=True)
    if json_output:
        typer.echo(json.dumps(document, indent=2))
    else:
        console_out = Console()
        if not console_out.is_terminal:
            console_out = Console(width=TABLE_WIDTH)  # not a terminal: do not cut columns
        console_out.print(_table(url, measured, kinds, percentiles))
        from tuner.study.record import trial_figure  # the study's one rule, as it ranks a trial

        figure = trial_figure([level.to_dict() for level in measured])
        if figure.value is not None:
            console_out.print(
                f"figure (as a study ranks it): {figure.value:,.1f} output tok/s at "
                f"c={figure.concurrency}"
                + (", a lower bound: the client fell behind" if figure.bound else "")
            )
    if error:
        raise _fail(f"{error}; fix: see the server's log, or lower the concurrency", 1)
