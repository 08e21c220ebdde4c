"""``python -m tuner.emulator``: start one emulated GLM-5 server the way SGLang starts.

Order of events: parse SGLang's flags (exit 2 on an unknown one); read the patched source files;
refuse a configuration that SGLang's start-up checks reject (exit 1, before anything else);
listen on ``--host``/``--port`` (``/health`` is 503 meanwhile); print the start-up; serve after
``The server is fired up and ready to roll!``. A failure under load logs SGLang's traceback and
ends the process at once (``os._exit``, so connections drop); SIGTERM or SIGINT stops it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from aiohttp import web

from tuner.emulator.versions import installed
from tuner.emulator import gpu_state
from tuner.emulator.auth import ApiKeys
from tuner.emulator.batch_core import BatchCore, CoreRequest
from tuner.emulator.batch_log import BatchLog
from tuner.emulator.bursts import quiet_for
from tuner.emulator.cli_args import parse_server_args
from tuner.emulator.engine_rules import EngineSettings, StartFailure, resolve_settings
from tuner.emulator.metrics import SchedulerMetrics
from tuner.emulator.noise import Noise
from tuner.emulator.outputs import completion
from tuner.emulator.perf_model import EngineModel, engine_from_settings
from tuner.emulator.scheduler import Scheduler
from tuner.emulator.server import EmulatedServer
from tuner.emulator.sglang_log import SglangLog
from tuner.emulator.speculative import decode_log_fields, speculative_metrics
from tuner.emulator.source_files import SourceState, read_source_state
from tuner.emulator.startup import plan_startup, run_startup
from tuner.emulator.tp_worker import start_worker

__all__ = ["main"]

READY_LINE = "The server is fired up and ready to roll!"
TRACE_ENV = "TUNER_EMULATOR_TRACE"
STATE_PERIOD_S = 0.25  # in the emulated host's time: divided by the time scale, at least 5 ms
WARMUP_TOKENS = 8
LISTEN_BACKLOG = 2048  # uvicorn's default, as SGLang serves: 1,024 clients connecting at once fit


def _server_info(
    args: dict[str, Any],
    settings: EngineSettings | StartFailure,
    source: SourceState,
    time_scale: float,
    seed: int,
) -> dict[str, Any]:
    info = {
        key: ("***" if key.endswith("api_key") and value else value) for key, value in args.items()
    }
    if isinstance(settings, EngineSettings):
        info.update(
            mem_fraction_static=settings.mem_fraction,
            max_running_requests=settings.max_running,
            chunked_prefill_size=settings.chunk_tokens,
            kv_cache_dtype=settings.kv_cache_dtype,
            cuda_graph_max_bs=settings.cuda_graph_max_bs or None,
            page_size=64,
            attention_backend=settings.attention_backend,
            max_total_num_tokens=settings.kv_tokens,
            max_req_input_len=settings.kv_tokens - 1,
        )
    info["version"] = installed().version
    info["emulator"] = {
        "time_scale": time_scale,
        "emulated": True,
        "seed": seed,
        "patched_gate": source.patched_gate,
        "forced_allreduce": source.forced_allreduce,
        "sglang_package": str(source.package_dir),
    }
    return info


def _fatal(log: SglangLog, settings: EngineSettings, kind: str) -> None:
    log.scheduler_exception(kind, settings.failure_line(kind))
    gpu_state.clear_load(os.getpid())
    os._exit(1)


def _counting(runner: web.AppRunner, server: EmulatedServer) -> Callable[[], asyncio.Protocol]:
    """aiohttp's protocol factory (one protocol per accepted connection), counting connections."""
    factory = runner.server
    assert factory is not None

    def protocol() -> asyncio.Protocol:
        server.connection_opened()
        return factory()

    return protocol


def _scheduler_ended(log: SglangLog, task: asyncio.Task[None]) -> None:
    """A scheduler that raised is a bug of the emulator: report it as SGLang would and stop."""
    if task.cancelled() or task.exception() is None:
        return
    error = task.exception()
    log.tp(f"Scheduler hit an exception: {type(error).__name__}: {error}", level=logging.ERROR)
    gpu_state.clear_load(os.getpid())
    os._exit(1)


class _Telemetry:
    """Publishes the GPU load for ``nvidia-smi`` every :data:`STATE_PERIOD_S` of the emulated
    host's time (a level of a fraction of a real second is seen serving, not idle)."""

    def __init__(self, time_scale: float, gpus: tuple[int, ...] | None) -> None:
        self.time_scale = time_scale
        self.gpus = gpus
        self.phase = "loading"
        self.memory_mib = 0
        self.scheduler: Scheduler | None = None

    async def run(self) -> None:
        pid, last = os.getpid(), (time.monotonic(), 0)
        while True:
            running = queued = 0
            rate = 0.0
            if self.scheduler is not None:
                now, tokens = time.monotonic(), self.scheduler.tokens_out
                rate = (tokens - last[1]) / max(now - last[0], 1e-9) / self.time_scale
                last = (now, tokens)
                running = len(self.scheduler.core.running)
                queued = len(self.scheduler.core.waiting)
            gpu_state.write_load(
                gpu_state.GpuLoad(
                    pid,
                    self.phase,
                    self.memory_mib,
                    running,
                    queued,
                    rate,
                    gpu_state.now(),
                    self.gpus,
                )
            )
            await asyncio.sleep(max(0.005, STATE_PERIOD_S / self.time_scale))


def _scheduler(
    engine: EngineModel,
    args: dict[str, Any],
    log: SglangLog,
    rng: random.Random,
    time_scale: float,
    metrics: SchedulerMetrics | None,
) -> Scheduler:
    settings = engine.settings
    core = BatchCore(engine.timing(Noise(rng), time_scale), notify_every=args["stream_interval"])
    trace_path = os.environ.get(TRACE_ENV)
    batch_log = BatchLog(
        log,
        args["decode_log_interval"],
        cuda_graph=lambda batch: settings.cuda_graphs and batch <= settings.cuda_graph_max_bs,
        speculation=decode_log_fields(settings.speculation),
        metrics=metrics,
    )
    return Scheduler(
        core,
        batch_log,
        on_failure=lambda kind: _fatal(log, settings, kind),
        trace=open(trace_path, "w", buffering=1 << 16) if trace_path else None,
        quiet_s=quiet_for(time_scale),
    )


async def _warm_up(scheduler: Scheduler) -> None:
    """SGLang's own warm-up request (and the first use of the output tables, off the clock)."""
    completion([1, 2, 3, 4, 5, 6, 7, 8], WARMUP_TOKENS)
    stream = scheduler.submit(CoreRequest(0, 8, WARMUP_TOKENS))
    while not stream.finished:
        await stream.changed.wait()
        stream.changed.clear()


async def _serve(
    args: dict[str, Any],
    settings: EngineSettings | StartFailure,
    source: SourceState,
    log: SglangLog,
    time_scale: float,
    seed: int,
) -> int:
    rng = random.Random(seed)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    plan = plan_startup(settings, rng)
    info = _server_info(args, settings, source, time_scale, seed)
    info["emulator"]["startup_s"] = round(plan.total_s, 1)  # host seconds: what a host would spend
    server = EmulatedServer(
        info,
        args["served_model_name"] or args["model_path"],
        rng,
        stream_output=args["stream_output"],
        stream_interval=args["stream_interval"],
        keys=ApiKeys(args["api_key"], args["admin_api_key"]),
        metrics_enabled=args["enable_metrics"],
    )
    runner = web.AppRunner(server.app(), access_log=None, handle_signals=False)
    await runner.setup()
    try:
        listener = await loop.create_server(
            _counting(runner, server), args["host"], args["port"], backlog=LISTEN_BACKLOG
        )
    except OSError as error:
        log.main(
            f"ERROR: [Errno {error.errno}] error while attempting to bind on address "
            f"({args['host']!r}, {args['port']}): {error.strerror}",
            level=logging.ERROR,
        )
        await runner.cleanup()
        return 1
    gpus = gpu_state.server_devices(args)
    telemetry = _Telemetry(time_scale, gpus)
    tasks = [asyncio.create_task(telemetry.run())]
    try:
        if gpus is None and isinstance(settings, EngineSettings):  # a GPU that is not there
            settings = StartFailure(
                "startup-crash", "load", "RuntimeError: CUDA error: invalid device ordinal"
            )
        failure = await run_startup(
            log,
            settings,
            source,
            plan,
            time_scale,
            lambda mib: setattr(telemetry, "memory_mib", mib),
            gpus,
        )
        if failure is not None or not isinstance(settings, EngineSettings):
            return 1
        log.raw(f"INFO:     Started server process [{os.getpid()}]", logging.INFO)
        log.raw("INFO:     Waiting for application startup.", logging.INFO)
        log.raw("INFO:     Application startup complete.", logging.INFO)
        log.raw(
            f"INFO:     Uvicorn running on http://{args['host']}:{args['port']} "
            "(Press CTRL+C to quit)",
            logging.INFO,
        )
        engine = engine_from_settings(settings)
        metrics = (
            SchedulerMetrics(args["served_model_name"] or args["model_path"], settings.kv_tokens)
            if args["enable_metrics"]
            else None
        )
        if metrics is not None:  # speculative decoding's gauges (0 without speculation, as SGLang)
            for name, value in speculative_metrics(settings.speculation).items():
                metrics.register_extra(name, f"{name} (emulated)", functools.partial(float, value))
        scheduler = _scheduler(engine, args, log, rng, time_scale, metrics)
        telemetry.scheduler = scheduler
        telemetry.phase = "ready"
        tasks.append(asyncio.create_task(scheduler.run()))
        tasks[-1].add_done_callback(lambda task: _scheduler_ended(log, task))
        await _warm_up(scheduler)
        log.raw(
            f'INFO:     127.0.0.1:{40000 + seed % 20000} - "POST /generate HTTP/1.1" 200 OK',
            logging.INFO,
        )
        server.serve(engine, scheduler, metrics)
        log.main(READY_LINE)
        await stop.wait()
        return 0
    finally:
        for task in tasks:
            task.cancel()
        gpu_state.clear_load(os.getpid())
        listener.close()
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the emulated server; returns the process exit code."""
    args = parse_server_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stdout,
        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
    )
    time_scale = args.pop("time_scale")
    seed = args.pop("emulator_seed")
    seed = random.SystemRandom().randrange(1 << 31) if seed is None else seed
    source = read_source_state()
    log = SglangLog(source.package_dir, level=args["log_level"])
    log.main(
        f"tuner.emulator: EMULATED GLM-5 host (not SGLang), time scale K={time_scale:g}, "
        f"seed {seed}, sglang stand-in {source.package_dir}"
        + (" (shipped, unpatched)" if source.shipped else ""),
        level=logging.WARNING,
    )
    # SGLang logs every field of its ServerArgs at start, its keys too (a log the tuner keeps is
    # scrubbed of them: tuner.scrub)
    log.main(
        "server_args=ServerArgs("
        + ", ".join(
            f"{key}={args[key]!r}"
            for key in (
                "model_path",
                "tp_size",
                "quantization",
                "mem_fraction_static",
                "max_running_requests",
                "moe_runner_backend",
                "attention_backend",
                "disable_cuda_graph",
                "host",
                "port",
                "api_key",
                "admin_api_key",
            )
        )
        + ", ...)"
    )
    settings = resolve_settings(args, source.patched_gate, source.forced_allreduce)
    if isinstance(settings, StartFailure) and settings.stage == "args":
        log.refusal(settings.message)
        return 1
    start_worker()  # a tensor-parallel worker that may outlive this process ($TUNER_EMULATOR_WORKER_LINGER_S)
    return asyncio.run(_serve(args, settings, source, log, time_scale, seed))
