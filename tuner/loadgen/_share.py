"""One client process's share of a level: its warm-up, its requests, its streams, its result.

:func:`measure_share` runs slots ``k, k+N, ...`` of a level in this process (``N = 1``: the
whole level) and returns a :class:`ShareResult`: the request log, the span, the client's own
health. :mod:`tuner.loadgen._level` runs one share; :mod:`tuner.loadgen._workers` runs ``N`` in
processes and merges them; :mod:`tuner.loadgen._level_figures` turns either into the level's
figures.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

import aiohttp

from tuner.errors import TunerError
from tuner.loadgen._apis import ApiFormat, Dialect, api_format, as_dialect
from tuner.loadgen._datasets import Picked, level_requests
from tuner.loadgen._health import ClientHealth, HealthWatch
from tuner.loadgen._open_loop import arrival_times
from tuner.loadgen._phase import Phase, run_phase
from tuner.loadgen._server import emulator_clock, emulator_lag, fetch_model, fetch_server_info
from tuner.loadgen._spec import LevelSpec
from tuner.loadgen._stream import COMPLETED, JSON_HEADERS, NOT_RUN, RequestLog, send_time_trace
from tuner.timescale import TimeScale

__all__ = [
    "ShareNotStarted",
    "ShareResult",
    "StopCheck",
    "measure_share",
    "measured_requests",
    "warmup_requests",
]

StopCheck = Callable[[], str | None]

WARMUP_OUTPUT_LEN = 16
LEVEL_HEADER = "X-Tuner-Level"  # a closed-loop level declared to an emulated server
OPEN_LOOP = "open"  # ... or an open-loop one (its requests come at their arrival times)
WALL_ROOM = 4.0  # an emulated level's wall-clock limit, in multiples of its virtual one
CONNECT_TIMEOUT_S = 10.0
READ_BUFFER_BYTES = 1 << 20


@dataclass(frozen=True)
class Bodies:
    """A level's request bodies, serialized before it starts; ``estimated``: the prompt lengths
    are the client's estimates (text prompts, or token ids sent as words to a server that takes
    text only)."""

    bodies: list[bytes]
    estimated: bool


@dataclass(frozen=True)
class ShareNotStarted:
    """Why a share could not start (the server did not answer, the warm-up failed)."""

    reason: str


@dataclass(frozen=True)
class Span:
    """A level's start and end, on the clock that timed it."""

    started: float
    ended: float


def _bodies(fmt: ApiFormat, picked: Picked, model: str | None) -> Bodies:
    """The request bodies of ``picked`` (see :class:`Bodies`)."""
    bodies = [
        json.dumps(fmt.request(p, n, model, True)).encode()
        for p, n in zip(picked.prompts, picked.output_lens)
    ]
    as_words = fmt.sends_text_for_ids and any(not isinstance(p, str) for p in picked.prompts)
    return Bodies(bodies, picked.estimated or as_words)


def measured_requests(spec: LevelSpec, api: str) -> Picked:
    """The level's measured requests: places ``spec.first_request ..`` of its run's stream
    (``[seed, 0]``), so a later level never repeats an earlier one's prompts, which a server's
    prefix cache would serve without prefilling them."""
    return level_requests(
        spec.dataset,
        spec.num_requests,
        spec.input_len,
        spec.output_len,
        [spec.seed, 0],
        api,
        spec.first_request,
    )


def warmup_requests(spec: LevelSpec, api: str, worker: int = 0) -> Picked:
    """The level's warm-up requests: short random-token ones from a stream of their own
    (``[seed, 1, worker]``), never the workload's prompts, so that the warm-up fills no
    cache with a prompt that a level then measures."""
    return level_requests(
        None,
        spec.warmup,
        spec.input_len,
        min(WARMUP_OUTPUT_LEN, spec.output_len),
        [spec.seed, 1, worker],
        api,
        spec.first_request,
    )


async def _warm_up(
    session: aiohttp.ClientSession,
    url: str,
    fmt: ApiFormat,
    spec: LevelSpec,
    scale: TimeScale,
    model: str | None,
    stop_check: StopCheck | None,
    worker: int = 0,
) -> str | None:
    """Send the level's warm-up requests (short ones, at the level's concurrency at most);
    they open the connections the level then reuses. Returns why it failed, if it did."""
    if not spec.warmup:
        return None
    picked = warmup_requests(spec, fmt.name, worker)
    concurrency = min(spec.warmup, spec.concurrency)
    warm = Phase(RequestLog(spec.warmup), concurrency, budget=spec.warmup - 1)
    deadline = time.perf_counter() + scale.to_server(spec.time_limit_s)
    await run_phase(
        session,
        url,
        fmt,
        warm,
        _bodies(fmt, picked, model).bodies,
        picked.prompt_lens,
        deadline,
        None,
        stop_check,
    )
    return warm.stop_reason


@dataclass
class ShareResult:
    """What one client process measured of a level (its share of the slots)."""

    log: RequestLog
    started: float
    ended: float
    stop_reason: str | None
    errors: list[str]
    health: ClientHealth | None
    scale: TimeScale
    estimated: bool = False  # prompt lengths are the client's estimates (text prompts)
    repeated_prompts: int = 0  # the level's requests whose prompt its run had already sent


def _span(log: RequestLog, stamped: bool, started: float, ended: float, closed: bool) -> Span:
    """The level's start and end: on the emulator's clock, its first arrival and last event.

    On this process's clock a closed loop starts at its first send: until then the server had
    nothing of the level to serve, so a client that stalled before sending (a busy machine
    descheduling it) would otherwise read its own stall as the server's slowness. An open loop
    keeps its start: its arrivals are scheduled from it, and a late first arrival is the
    client's lateness, measured as such. Likewise a closed loop whose every request ran ends
    at its last event read, not when this process next looked. A level stopped early keeps
    both ends."""
    if not stamped:
        if not closed or NOT_RUN in log.status or not log.status:
            return Span(started, ended)
        # every request sent: from the first send to the last event read (or failure)
        last = max(log.end)
        return Span(max(started, min(log.start)), min(ended, last) if last > 0.0 else ended)
    done = log.indices(COMPLETED)
    if not done:
        return Span(0.0, 0.0)
    return Span(min(log.start[i] for i in done), max(log.end[i] for i in done))


async def measure_share(
    base_url: str,
    spec: LevelSpec,
    api: str | Dialect,
    scale: TimeScale | None,
    stamped: bool | None,
    stop_check: StopCheck | None,
    *,
    share: tuple[int, int] = (0, 1),
    gate: Callable[[], Awaitable[None]] | None = None,
    level_id: str | None = None,
    headers: dict[str, str] | None = None,
    progress: Callable[[RequestLog], None] | None = None,
) -> ShareResult | ShareNotStarted:
    """Warm up and run slots ``share[0]::share[1]`` of the level in this process.

    ``api``: an API's name or a :class:`Dialect` (the model's name, the extensions the server
    takes). ``scale``/``stamped`` None: read from ``/server_info``. ``gate`` is awaited between the
    warm-up and the level (several processes start the level together). Returns the share's
    result, or why it could not start (:class:`ShareNotStarted`).

    To an emulated server a closed-loop level is declared on every request (``X-Tuner-Level:
    <level_id> <concurrency> <requests>``, the whole level's figures in every share), so that
    its virtual clock waits for the requests an ideal client would send at once; an open-loop
    level is declared ``<level_id> open``, so that its requests arrive at their own times on a
    running virtual clock (no burst gathered, no refill waited for). ``headers`` go with every
    request (the server's API key: :func:`tuner.loadgen.auth_headers`). ``progress`` is called
    with the level's request log while it runs (about every 100 ms, in a worker thread).
    """
    dialect = as_dialect(api)
    fmt = api_format(dialect)
    base = base_url.rstrip("/")
    worker, workers = share
    concurrency = spec.concurrency // workers + (worker < spec.concurrency % workers)
    indices = range(worker, spec.num_requests, workers)
    if scale is None or stamped is None:
        try:
            async with aiohttp.ClientSession(headers=headers) as asking:
                info = await fetch_server_info(asking, base)
        except (TunerError, TypeError, ValueError) as exc:
            return ShareNotStarted(str(exc))
        scale = scale or TimeScale.from_server_info(info)
        stamped = emulator_clock(info) if stamped is None else stamped
    budget = scale.to_server(spec.time_limit_s)
    # On an emulated server the limit holds on its virtual clock; the wall clock only catches a
    # server that stopped answering, with room for a machine busy with other work: its connects
    # (1,024 at once on a starved machine) and its reads get that whole room too.
    wall_limit = budget * WALL_ROOM if stamped else budget
    timeout = aiohttp.ClientTimeout(
        total=None,
        sock_connect=max(CONNECT_TIMEOUT_S, wall_limit) if stamped else CONNECT_TIMEOUT_S,
        sock_read=max(wall_limit, 1.0),
    )
    connector = aiohttp.TCPConnector(limit=max(concurrency, 1))
    async with aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        read_bufsize=READ_BUFFER_BYTES,
        trace_configs=[send_time_trace()],
        headers=headers,
    ) as session:
        try:
            model = dialect.model
            if fmt.needs_model and model is None:
                model = await fetch_model(session, base)
        except (TunerError, TypeError, ValueError) as exc:
            return ShareNotStarted(str(exc))
        url = base + fmt.path
        warm_spec = replace(spec, warmup=-(-spec.warmup // workers), concurrency=concurrency)
        failed_warm_up = await _warm_up(
            session, url, fmt, warm_spec, scale, model, stop_check, worker
        )
        if failed_warm_up:
            return ShareNotStarted(f"warm-up failed: {failed_warm_up}")
        picked = measured_requests(spec, fmt.name)
        prepared = _bodies(fmt, picked, model)
        estimated = prepared.estimated
        bodies = [prepared.bodies[i] for i in indices]
        lengths = [picked.prompt_lens[i] for i in indices]
        phase = Phase(RequestLog(len(bodies)), concurrency, budget=spec.error_budget)
        phase.log.asked = [picked.output_lens[i] for i in indices]
        headers = JSON_HEADERS
        if stamped:  # a closed loop's size, or an open loop (its arrivals are its own)
            shape = (
                f"{spec.concurrency} {spec.num_requests}"
                if spec.request_rate is None
                else OPEN_LOOP
            )
            headers = {**JSON_HEADERS, LEVEL_HEADER: f"{level_id or uuid.uuid4().hex} {shape}"}
        if gate is not None:
            await gate()
        watch = HealthWatch()
        watch.start()
        started = time.perf_counter()
        deadline = started + wall_limit
        # An open loop: this share's requests at their times in the whole level's schedule.
        arrivals = arrival_times(spec, started, scale)
        if arrivals is not None:
            arrivals = [arrivals[i] for i in indices]
        check = stop_check if progress is None else _reporting(stop_check, phase.log, progress)
        ended = await run_phase(
            session,
            url,
            fmt,
            phase,
            bodies,
            lengths,
            deadline,
            arrivals,
            check,
            time_limit_s=spec.time_limit_s,
            stamped=bool(stamped),
            headers=headers,
            virtual_limit=budget if stamped else None,
        )
        lag_p99, lag_max, cpu = await watch.stop()
        lag = emulator_lag(await _quiet_server_info(session, base)) if stamped else None
    span = _span(phase.log, bool(stamped), started, ended, arrivals is None)
    health = ClientHealth(
        clock="emulator" if stamped else "client",
        loop_lag_p99_ms=lag_p99,
        loop_lag_max_ms=lag_max,
        cpu_busy=cpu,
        emulator_lag_s=lag,
    )
    return ShareResult(
        phase.log,
        span.started,
        span.ended,
        phase.stop_reason,
        phase.errors,
        health,
        scale,
        estimated,
        picked.repeated,
    )


def _reporting(
    stop_check: StopCheck | None, log: RequestLog, progress: Callable[[RequestLog], None]
) -> StopCheck:
    """``stop_check`` that also shows ``log`` to ``progress`` each time it is polled."""

    def check() -> str | None:
        progress(log)
        return stop_check() if stop_check is not None else None

    return check


async def _quiet_server_info(session: aiohttp.ClientSession, base: str) -> dict | None:
    try:
        return await fetch_server_info(session, base)
    except TunerError:
        return None
