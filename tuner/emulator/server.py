"""The HTTP surface of the emulated server (aiohttp): the endpoints the tuner uses.

``/health`` and ``/health_generate`` answer 503 until the start-up is over, then 200;
``/model_info``, ``/server_info`` (with ``emulator.time_scale``) and ``/v1/models`` answer from
the start; ``/metrics`` (with ``--enable-metrics``, else 404) SGLang's scheduler gauges
(:mod:`tuner.emulator.metrics`) once the engine serves; ``/generate``, ``/v1/completions`` and ``/v1/chat/completions`` generate, streamed
(SSE ``data: {...}`` lines ending with ``data: [DONE]``) or not, paced by the
:class:`~tuner.emulator.scheduler.Scheduler`.
"""

from __future__ import annotations

import json
import random
import time
import uuid
import weakref
from collections import OrderedDict
from typing import Any

from aiohttp import web

from tuner.emulator import api
from tuner.emulator.auth import ApiKeys
from tuner.emulator.batch_core import CoreRequest
from tuner.emulator.bursts import DeclaredLevel, open_loop
from tuner.emulator.engine_rules import WEIGHTS_GB
from tuner.emulator.metrics import CONTENT_TYPE, SchedulerMetrics
from tuner.emulator.outputs import completion
from tuner.emulator.perf_model import EngineModel
from tuner.emulator.scheduler import Scheduler, Stream

__all__ = ["EmulatedServer"]

CONTEXT_LENGTH = 202_752  # GLM-5's max positions
RADIX_ENTRIES = 8192
LEVEL_HEADER = "X-Tuner-Level"  # the tuner's client declares its closed loop (emulated only)
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
_DISCONNECTED = (ConnectionResetError, ConnectionError, RuntimeError)


def _error(status: int, message: str) -> web.Response:
    body = {"object": "error", "message": message, "type": "BadRequestError", "code": status}
    return web.json_response({"error": body, **body}, status=status)


class EmulatedServer:
    """Request handling of one emulated server.

    Generation answers 503 until :meth:`serve` hands over the engine and its scheduler (a
    configuration that fails at start never gets there).

    Args:
        server_info: ``/server_info`` without the live figures.
        model_name: the served model name.
        rng: draws sampled (temperature > 0) outputs.
        stream_output: SGLang's ``--stream-output`` (disjoint segments on ``/generate``).
        stream_interval: SGLang's ``--stream-interval``: an event every this many tokens (and
            for the first and the last); events the handler could not send in time are sent
            one after the other, never merged.
        keys: SGLang's ``--api-key`` and ``--admin-api-key``, enforced as SGLang does
            (:mod:`tuner.emulator.auth`: 401 without the right bearer, ``/health`` open).
        metrics_enabled: SGLang's ``--enable-metrics``: ``/metrics`` is served.
    """

    def __init__(
        self,
        server_info: dict[str, Any],
        model_name: str,
        rng: random.Random,
        stream_output: bool = False,
        stream_interval: int = 1,
        keys: ApiKeys = ApiKeys(),
        metrics_enabled: bool = False,
    ) -> None:
        self.engine: EngineModel | None = None
        self.scheduler: Scheduler | None = None
        self.server_info = server_info
        self.model_name = model_name
        self.rng = rng
        self.stream_output = stream_output
        self.stream_interval = max(1, stream_interval)
        self.keys = keys
        self.metrics_enabled = metrics_enabled
        self.metrics: SchedulerMetrics | None = None
        self.ready = False
        self._radix: OrderedDict[int, None] = OrderedDict()
        self._next_id = 0
        self._generating_connections: weakref.WeakSet[Any] = weakref.WeakSet()
        self._seen_connections: weakref.WeakSet[Any] = weakref.WeakSet()

    def serve(
        self, engine: EngineModel, scheduler: Scheduler, metrics: SchedulerMetrics | None = None
    ) -> None:
        """Start answering generation requests with ``engine``, paced by ``scheduler`` (whose
        gauges ``metrics`` are, with ``--enable-metrics``)."""
        self.engine, self.scheduler, self.metrics = engine, scheduler, metrics
        self.ready = True

    def app(self) -> web.Application:
        """The aiohttp application with every route."""
        app = web.Application(
            client_max_size=64 << 20, middlewares=[self._first_request, self._authorized]
        )
        app.router.add_get("/health", self.health)
        app.router.add_get("/health_generate", self.health)
        app.router.add_get("/model_info", self.model_info)
        app.router.add_get("/get_model_info", self.model_info)
        app.router.add_get("/server_info", self.get_server_info)
        app.router.add_get("/get_server_info", self.get_server_info)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.get_metrics)
        app.router.add_route("*", "/flush_cache", self.flush_cache)
        app.router.add_post("/generate", lambda r: self.generate(r, "generate"))
        app.router.add_post("/v1/completions", lambda r: self.generate(r, "completions"))
        app.router.add_post("/v1/chat/completions", lambda r: self.generate(r, "chat"))
        return app

    @web.middleware
    async def _first_request(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Tell the scheduler when a connection sends its first request (of any kind)."""
        transport = request.transport
        if transport is not None and transport not in self._seen_connections:
            self._seen_connections.add(transport)
            if self.scheduler is not None:
                self.scheduler.connection_used()
        return await handler(request)

    @web.middleware
    async def _authorized(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """SGLang's API-key middleware: 401 ``{"error": "Unauthorized"}`` without the key."""
        if not self.keys.allows(
            request.method, request.path, request.headers.get("Authorization")
        ):
            return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    def connection_opened(self) -> None:
        """A client connected (called by the listener for every accepted connection)."""
        if self.scheduler is not None:
            self.scheduler.connection_opened()

    # -- information ----------------------------------------------------------------------------

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.ready else 503)

    async def model_info(self, request: web.Request) -> web.Response:
        path = self.server_info["model_path"]
        return web.json_response(
            {
                "model_path": path,
                "tokenizer_path": self.server_info.get("tokenizer_path") or path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": "glm_moe_dsa",
                "architectures": ["GlmMoeDsaForCausalLM"],
            }
        )

    async def get_server_info(self, request: web.Request) -> web.Response:
        info = dict(self.server_info)
        if self.engine is None or self.scheduler is None:
            return web.json_response(info)
        info["emulator"] = {**info["emulator"], "schedule": self.scheduler.lag_report()}
        core = self.scheduler.core
        info["internal_states"] = [
            {
                "last_gen_throughput": 0.0,
                "memory_usage": {
                    "weight": round(WEIGHTS_GB, 2),
                    "kvcache": round(self.engine.settings.kv_gb, 2),
                    "token_capacity": self.engine.settings.kv_tokens,
                    "graph": 1.2,
                },
                "effective_max_running_requests_per_dp": self.engine.settings.max_running,
                "avg_spec_accept_length": None,
                "running_requests": len(core.running),
                "queued_requests": len(core.waiting),
            }
        ]
        return web.json_response(info)

    async def get_metrics(self, request: web.Request) -> web.Response:
        if not self.metrics_enabled:
            raise web.HTTPNotFound()
        body = self.metrics.render() if self.metrics is not None else b""
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.model_name,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "sglang",
                        "root": self.model_name,
                        "max_model_len": CONTEXT_LENGTH,
                    }
                ],
            }
        )

    async def flush_cache(self, request: web.Request) -> web.Response:
        if self.scheduler is not None and self.scheduler.core.busy:
            return web.Response(status=400, text="Cache not flushed: requests are running.")
        self._radix.clear()
        return web.Response(text="Cache flushed.")

    # -- generation -----------------------------------------------------------------------------

    def _output_length(self, request: api.GenerationRequest) -> int:
        if request.ignore_eos:
            return request.max_new_tokens
        natural = 16 + hash(tuple(request.prompt_ids[:64])) % 496  # where the model says EOS
        return min(request.max_new_tokens, natural)

    def _cached_tokens(self, engine: EngineModel, prompt_ids: list[int]) -> int:
        if not engine.settings.radix_cache:
            return 0
        key = hash(tuple(prompt_ids))
        if key in self._radix:
            self._radix.move_to_end(key)
            return len(prompt_ids) - 1
        self._radix[key] = None
        if len(self._radix) > RADIX_ENTRIES:
            self._radix.popitem(last=False)
        return 0

    async def generate(self, http: web.Request, kind: str) -> web.StreamResponse:
        engine, scheduler = self.engine, self.scheduler
        if not self.ready or engine is None or scheduler is None:
            return _error(503, "The server is not ready yet (starting up).")
        try:
            request = api.parse_request(
                kind, json.loads(await http.read()), incremental=self.stream_output
            )
        except (ValueError, api.RequestError) as error:
            return _error(400, str(error))
        length = self._output_length(request)
        limit = min(CONTEXT_LENGTH, engine.settings.kv_tokens)
        if len(request.prompt_ids) + request.max_new_tokens > limit:
            return _error(
                400,
                f"The input ({len(request.prompt_ids)} tokens) plus "
                f"max_new_tokens ({request.max_new_tokens}) exceeds the maximum of "
                f"{limit} tokens.",
            )
        output = completion(
            request.prompt_ids,
            length,
            garbage=engine.settings.garbage_output,
            temperature=request.temperature,
            seed=self.rng.getrandbits(63),
        )
        self._next_id += 1
        core_request = CoreRequest(
            self._next_id,
            len(request.prompt_ids),
            length,
            self._cached_tokens(engine, request.prompt_ids),
        )
        rid = request.rid or uuid.uuid4().hex
        started = time.monotonic()
        connection = http.transport
        follow_up = connection is not None and connection in self._generating_connections
        if connection is not None:
            self._generating_connections.add(connection)
        declared = http.headers.get(LEVEL_HEADER)
        stream = scheduler.submit(
            core_request,
            follow_up=follow_up,
            level=DeclaredLevel.parse(declared),
            open_loop=open_loop(declared),
        )
        if not request.stream:
            try:
                while not stream.finished:
                    await stream.changed.wait()
                    stream.changed.clear()
            finally:
                scheduler.cancel(stream)
            meta = self._meta(core_request, started, True)
            return web.json_response(
                api.reply(request, rid, output, stream.generated, meta, self.model_name)
            )
        return await self._stream(http, scheduler, request, rid, output, stream, started)

    def _meta(self, request: CoreRequest, started: float, done: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "cached_tokens": request.cached_len,
            "weight_version": "default",
            "total_retractions": request.retractions,
        }
        if done:
            meta["e2e_latency"] = time.monotonic() - started
        return meta

    def _event_counts(self, sent: int, count: int) -> list[int]:
        """Token counts of the events due after ``sent`` up to ``count``: 1, every interval, last."""
        every = self.stream_interval
        points = set(range((sent // every + 1) * every, count + 1, every))
        points.update(p for p in (1, count) if sent < p <= count)
        return sorted(points)

    async def _stream(
        self,
        http: web.Request,
        scheduler: Scheduler,
        request: api.GenerationRequest,
        rid: str,
        output: Any,
        stream: Stream,
        started: float,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers=SSE_HEADERS)
        cursor = api.StreamCursor()
        try:
            await response.prepare(http)
            while True:
                await stream.changed.wait()
                stream.changed.clear()
                count, done = stream.generated, stream.finished
                for point in self._event_counts(cursor.sent_tokens, count):
                    last = done and point == count
                    await response.write(
                        api.event(
                            request,
                            rid,
                            output,
                            point,
                            last,
                            cursor,
                            self._meta(stream.request, started, last),
                            self.model_name,
                            clock=(stream.arrived, stream.stamp(point)),
                        )
                    )
                if done:
                    break
            if request.include_usage and request.api != "generate":
                await response.write(
                    api.usage_chunk(
                        request,
                        rid,
                        stream.generated,
                        self.model_name,
                        clock=(stream.arrived, stream.stamp(stream.generated)),
                    )
                )
            await response.write(b"data: [DONE]\n\n")
        except _DISCONNECTED:
            pass  # the client went away; its request is dropped below
        finally:
            scheduler.cancel(stream)
        return response
