"""A strict OpenAI-compatible server, as ``transformers serve`` 5.17 behaves (recipes.md, "A real
GPU server on one H200"; tests/fixtures/transformers/): a real aiohttp server on 127.0.0.1.

- ``POST /v1/completions`` and ``/v1/chat/completions`` refuse a field outside the OpenAI API
  with 422 ``{"detail": "Unexpected fields in the request: {'ignore_eos'}"}`` (also inside
  ``stream_options``), a prompt that is not a string with 400 ``{"detail": "prompt must be a
  string."}``, and a model other than the one served (``--model-name``, default the positional
  MODEL) with 404.
- A stream sends one chunk a token (text, no usage), then a last chunk with ``finish_reason``
  (``"length"``, or ``"stop"`` for a reply that ends early) and, when ``include_usage`` was
  asked, ``usage``; it never sends ``data: [DONE]``.
- ``--stop-early-every N`` ends every N-th request after ``--stop-after`` tokens with
  ``finish_reason: "stop"`` (a model that reached its end-of-sequence token).
- ``GET /v1/models`` answers 500 (``--models error``, transformers' missing hub cache) or an
  empty list (``--models empty``); ``GET /health`` answers 200.
- ``--replay FILE`` answers every accepted streamed request with FILE's bytes as they are (a
  stream ``transformers serve`` sent, tests/fixtures/transformers/stream-cb.txt).
- ``--die-at-first-request STATUS`` acts out a batching worker that starts at the first request
  and dies there (``transformers serve`` with a KV cache that does not fit): ``/health`` answers
  200, every generation request answers STATUS, and ``--die-log FILE`` (a log captured on the
  H200) is printed ``--die-log-delay`` seconds after the first answer, as the real server logs its
  traceback a moment after it answered.
- ``GET /stats`` returns its record of every request: the body's keys, the prompt's word count,
  tokens sent, finish reason, HTTP status.

It takes ``transformers serve``'s command line (``MODEL --host H --port P`` and any ``--cb-*``,
``--attn-implementation``, ``--continuous-batching`` flags, recorded in ``/stats``), prints
uvicorn's ``Application startup complete.`` once it listens, and ``PORT <n>`` with ``--port 0``.
:class:`StrictServer` starts it in its own process group and stops it on every path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import zlib
from pathlib import Path
from typing import Any, Self

if __package__:  # imported as tests.support.<name>
    from tests.support.child_server import ChildServer, option_args
else:  # run as a script: its own folder is on sys.path
    from child_server import ChildServer, option_args  # type: ignore[no-redef]

from aiohttp import web

__all__ = ["StrictServer"]

_COMMON = {"model", "max_tokens", "temperature", "stream", "stream_options", "top_p", "seed", "stop", "n"}
_FIELDS = {"/v1/completions": _COMMON | {"prompt"}, "/v1/chat/completions": _COMMON | {"messages"}}
_STREAM_OPTIONS = {"include_usage"}


class _State:
    """The options and the record of every request."""

    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        self.records: list[dict[str, Any]] = []
        self.requests = 0

    @property
    def served(self) -> str:
        return self.options.model_name or self.options.model


def _refusal(body: dict[str, Any], path: str, served: str) -> tuple[int, str] | None:
    unknown = set(body) - _FIELDS[path]
    unknown |= {f"stream_options.{k}" for k in set(body.get("stream_options") or {}) - _STREAM_OPTIONS}
    if unknown:
        return 422, "Unexpected fields in the request: {" + ", ".join(map(repr, sorted(unknown))) + "}"
    if path == "/v1/completions" and not isinstance(body.get("prompt"), str):
        return 400, "prompt must be a string."
    if path == "/v1/chat/completions" and not all(
            isinstance(m.get("content"), str) for m in body.get("messages") or [{}]):
        return 400, "message content must be a string."
    if body.get("model") != served:
        return 404, f"model {body.get('model')!r} is not served (serving {served!r})"
    return None


def _prompt_words(body: dict[str, Any]) -> int:
    if "prompt" in body:
        return len(str(body["prompt"]).split())
    return sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))


async def _generate(request: web.Request) -> web.StreamResponse:
    state: _State = request.app["state"]
    options = state.options
    body = await request.json()
    state.requests += 1
    record: dict[str, Any] = {"path": request.path, "keys": sorted(body),
                              "stream_options": body.get("stream_options"),
                              "model": body.get("model"), "prompt_words": _prompt_words(body)}
    state.records.append(record)
    refused = _refusal(body, request.path, state.served)
    if refused is not None:
        record["status"] = refused[0]
        return web.json_response({"detail": refused[1]}, status=refused[0])
    if options.die_at_first_request:
        record["status"] = options.die_at_first_request
        if state.requests == 1 and options.die_log:
            asyncio.get_running_loop().call_later(options.die_log_delay, _print_file, options.die_log)
        return web.json_response({"error": "CB worker died during request"},
                                 status=options.die_at_first_request)
    record["status"] = 200
    if options.replay and body.get("stream"):
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(Path(options.replay).read_bytes())
        await response.write_eof()
        return response
    asked = int(body.get("max_tokens") or 16)
    early = options.stop_early_every and state.requests % options.stop_early_every == 0
    tokens = min(asked, options.stop_after) if early else asked
    reason = "stop" if tokens < asked else "length"
    record.update(tokens=tokens, finish_reason=reason)
    chat = request.path == "/v1/chat/completions"
    seed = zlib.crc32(json.dumps(body.get("prompt", body.get("messages"))).encode())
    words = [f" w{(seed + i) % 97}" for i in range(tokens)]  # greedy: the prompt decides
    usage = {"prompt_tokens": record["prompt_words"], "completion_tokens": tokens,
             "total_tokens": record["prompt_words"] + tokens}
    if not body.get("stream"):
        await asyncio.sleep(options.itl_ms * tokens / 1e3)
        text = "".join(words)
        choice = {"index": 0, "finish_reason": reason}
        choice.update({"message": {"role": "assistant", "content": text}} if chat else {"text": text})
        return web.json_response({"object": "chat.completion" if chat else "text_completion",
                                  "model": state.served + "@main", "choices": [choice],
                                  "usage": usage})
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    kind = "chat.completion.chunk" if chat else "text_completion"
    for word in words:
        await asyncio.sleep(options.itl_ms / 1e3)
        choice = {"index": 0, **({"delta": {"content": word}} if chat else {"text": word})}
        await response.write(b"data: " + json.dumps({"object": kind, "choices": [choice]}).encode()
                             + b"\n\n")
    last: dict[str, Any] = {"object": kind, "choices": [
        {"index": 0, "finish_reason": reason, **({"delta": {}} if chat else {"text": ""})}]}
    if (body.get("stream_options") or {}).get("include_usage"):
        last["usage"] = usage
    await response.write(b"data: " + json.dumps(last).encode() + b"\n\n")
    await response.write_eof()  # and no `data: [DONE]`
    return response


def _print_file(path: str) -> None:
    print(Path(path).read_text(), end="", flush=True)


async def _models(request: web.Request) -> web.Response:
    if request.app["state"].options.models == "empty":
        return web.json_response({"object": "list", "data": []})
    return web.Response(status=500, text="Internal Server Error")


async def _health(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def _stats(request: web.Request) -> web.Response:
    state: _State = request.app["state"]
    return web.json_response({"records": state.records, "argv": sys.argv[1:]})


async def _serve(options: argparse.Namespace) -> None:
    app = web.Application()
    app["state"] = _State(options)
    app.router.add_post("/v1/completions", _generate)
    app.router.add_post("/v1/chat/completions", _generate)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/health", _health)
    app.router.add_get("/stats", _stats)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, options.host, options.port)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    if options.port == 0:
        print(f"PORT {port}", flush=True)
    print("INFO:     Application startup complete.", flush=True)
    print(f"INFO:     Uvicorn running on http://{options.host}:{port}", flush=True)
    await asyncio.Event().wait()


def main(argv: list[str] | None = None) -> None:
    """Parse ``transformers serve``'s command line (and this server's options) and serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="the served model (transformers serve's FORCE_MODEL)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model-name", default=None, help="the name requests must give")
    parser.add_argument("--models", choices=["error", "empty"], default="error")
    parser.add_argument("--itl-ms", type=float, default=2.0)
    parser.add_argument("--stop-early-every", type=int, default=0)
    parser.add_argument("--stop-after", type=int, default=3)
    parser.add_argument("--replay", default=None, help="answer streams with this file's bytes")
    parser.add_argument("--die-at-first-request", type=int, default=0, metavar="STATUS")
    parser.add_argument("--die-log", default=None, help="a captured log printed after dying")
    parser.add_argument("--die-log-delay", type=float, default=0.3)
    options, _engine_flags = parser.parse_known_args(argv)  # --continuous-batching, --cb-*, ...
    if options.host != "127.0.0.1":
        parser.error("loopback only: --host 127.0.0.1")
    asyncio.run(_serve(options))


class StrictServer(ChildServer):
    """The server in a child process of its own group; a context manager that always stops it.

    Args:
        model: the served model's path (its name in requests unless ``model_name`` is given).
        options: command-line options without dashes, e.g. ``models="empty"``.
    """

    def __init__(self, model: str = "/models/strict", **options: Any) -> None:
        super().__init__(Path(__file__).resolve(), [model, *option_args(options)], "strict server")

    def start(self, timeout_s: float = 30.0) -> Self:
        """Start the server and wait until it listens."""
        return super().start(timeout_s)

    def stats(self) -> dict[str, Any]:
        """The server's record of every request it got."""
        import urllib.request

        with urllib.request.urlopen(f"{self.url}/stats", timeout=10) as answer:
            return json.load(answer)


if __name__ == "__main__":
    main()
