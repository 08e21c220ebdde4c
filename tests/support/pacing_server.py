"""A real streaming HTTP server with known pacing, for testing the load generator.

It speaks SGLang's ``/generate`` and OpenAI's ``/v1/completions`` and ``/v1/chat/completions``
(SSE, ``data: [DONE]`` at the end), sends the first event ``--ttft-ms`` (plus up to
``--ttft-jitter-ms``, spread evenly over requests) after a request arrives and then one event
every ``--itl-ms x --tokens-per-event``, and writes its own send time
(``time.monotonic()``, the clock ``time.perf_counter()`` reads on Linux) into every event as
``server_send_time``. ``GET /stats`` returns its record of every streamed request (arrival,
first and last send time, tokens, events, a digest of its prompt), the reference the client's figures are checked
against. With ``--itl-ms 0`` it streams as fast as it can, ``--events-per-write`` events per
socket write, one token per event.

Run: ``python tests/support/pacing_server.py --port 0`` prints ``PORT <n>`` once it listens.
:class:`PacingServer` starts it in its own process group and stops it on every path.
"""

from __future__ import annotations


import argparse
import asyncio
import hashlib
import json
import os
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

if __package__:  # imported as tests.support.<name>
    from tests.support.child_server import ChildServer, option_args
else:  # run as a script: its own folder is on sys.path
    from child_server import ChildServer, option_args  # type: ignore[no-redef]

__all__ = ["PacingServer"]


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 500: "Internal Server Error"}


def _token_text(seed: int, index: int) -> str:
    return f" w{(seed + index) % 97}"


def _digest(body: dict) -> str:
    """A short digest of a request's prompt (ids, text or chat messages), to tell prompts apart."""
    prompt = next((body[key] for key in ("input_ids", "text", "prompt", "messages") if key in body), None)
    return hashlib.sha256(json.dumps(prompt, sort_keys=True).encode()).hexdigest()[:16]


def _usage(prompt_tokens: int, sent: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": sent,
        "total_tokens": prompt_tokens + sent,
    }


class _Server:
    """What every connection shares: the options, the request counter and the records."""

    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        self.records: list[dict[str, Any]] = []
        self.requests_seen = 0

    def get(self, path: str) -> tuple[int, Any]:
        """The answer to a GET (or a bodiless POST) of ``path``."""
        if path == "/stats":
            return 200, {"records": self.records}
        if path == "/stats/reset":
            self.records.clear()
            return 200, {"ok": True}
        if path == "/health":
            return 200, {"ok": True}
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": self.options.model}]}
        if path == "/server_info" and not self.options.no_server_info:
            info: dict[str, Any] = {"version": "pacing-server"}
            if self.options.time_scale is not None:
                info["emulator"] = {"time_scale": self.options.time_scale}
            return 200, info
        return 404, {"error": {"message": f"{path} not found"}}


_APIS = {"/generate": "sglang", "/v1/completions": "openai", "/v1/chat/completions": "openai-chat"}


# Linux: ask the kernel for each received packet's time (a struct timespec, CLOCK_REALTIME).
SO_TIMESTAMPNS = 35
_TIMESPEC = struct.Struct("@qq")


class _Connection:
    """One keep-alive HTTP/1.1 connection on a raw non-blocking socket.

    A request's arrival time is the kernel's receive time of its first bytes
    (``SO_TIMESTAMPNS``), converted to ``time.monotonic()``: it does not depend on how busy
    this process was when it read them.
    """

    def __init__(self, server: _Server, sock: socket.socket) -> None:
        self.server = server
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.buffer = b""
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)

    async def _receive(self) -> tuple[bytes, float]:
        """The next bytes and their kernel receive time on the monotonic clock."""
        while True:
            try:
                data, ancillary, _, _ = self.sock.recvmsg(1 << 16, 256)
                break
            except BlockingIOError:
                ready = self.loop.create_future()
                self.loop.add_reader(self.sock.fileno(), ready.set_result, None)
                try:
                    await ready
                finally:
                    self.loop.remove_reader(self.sock.fileno())
        stamp = time.monotonic()
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                seconds, nanoseconds = _TIMESPEC.unpack(payload[: _TIMESPEC.size])
                stamp += seconds + nanoseconds / 1e9 - time.time()
        return data, stamp

    async def serve(self) -> None:
        """Answer requests one after another until the client closes the connection."""
        try:
            arrival = 0.0
            while True:
                request = self._parse()
                if request is None:
                    data, stamp = await self._receive()
                    if not data:
                        return
                    if not self.buffer:
                        arrival = stamp
                    self.buffer += data
                    continue
                await self._handle(*request, arrival)
                arrival = time.monotonic()
        except (ConnectionError, OSError):
            return
        finally:
            self.sock.close()

    def _parse(self) -> tuple[str, str, bytes] | None:
        head_end = self.buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return None
        lines = self.buffer[:head_end].decode("latin-1").split("\r\n")
        method, path = lines[0].split(" ")[:2]
        length = 0
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if len(self.buffer) < head_end + 4 + length:
            return None
        body = self.buffer[head_end + 4 : head_end + 4 + length]
        self.buffer = self.buffer[head_end + 4 + length :]
        return method, path.split("?")[0], body

    async def _handle(self, method: str, path: str, body: bytes, arrival: float) -> None:
        if method == "POST" and path in _APIS:
            await self._generate(_APIS[path], json.loads(body), arrival)
        else:
            await self._respond(*self.server.get(path))

    async def _write(self, data: bytes) -> None:
        await self.loop.sock_sendall(self.sock, data)

    async def _respond(self, status: int, document: Any) -> None:
        payload = json.dumps(document).encode()
        await self._write(
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n".encode()
            + payload
        )

    async def _generate(self, api: str, body: dict, arrival: float) -> None:
        options = self.server.options
        self.server.requests_seen += 1
        every = options.fail_every
        if every and self.server.requests_seen % every == 0:
            await self._respond(500, {"error": {"message": "injected failure"}})
            return
        if api == "sglang":
            prompt = body.get("input_ids") or str(body.get("text", "")).split()
            max_tokens = int(body["sampling_params"]["max_new_tokens"])
        elif api == "openai":
            prompt = body["prompt"] if isinstance(body["prompt"], list) else body["prompt"].split()
            max_tokens = int(body["max_tokens"])
        else:
            prompt = " ".join(m["content"] for m in body["messages"]).split()
            max_tokens = int(body["max_tokens"])
        seed = sum(p if isinstance(p, int) else len(p) for p in prompt)
        if body.get("stream"):
            await self._stream(api, body, len(prompt), max_tokens, seed, arrival)
            return
        await asyncio.sleep((options.ttft_ms + options.itl_ms * max_tokens) / 1e3)
        text = "".join(_token_text(seed, i) for i in range(max_tokens))
        if api == "sglang":
            await self._respond(
                200,
                {
                    "text": text,
                    "meta_info": {"prompt_tokens": len(prompt), "completion_tokens": max_tokens},
                },
            )
        else:
            choice = {"text": text} if api == "openai" else {"message": {"content": text}}
            await self._respond(
                200, {"choices": [choice], "usage": _usage(len(prompt), max_tokens)}
            )

    def _event(
        self,
        api: str,
        continuous: bool,
        prompt_tokens: int,
        sent: int,
        new: str,
        text: str,
        final: bool,
        now: float,
    ) -> bytes:
        if api == "sglang":
            event: dict[str, Any] = {
                "text": text,
                "meta_info": {
                    "id": "r",
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": sent,
                    "finish_reason": {"type": "length"} if final else None,
                    "server_send_time": now,
                },
            }
        else:
            choice: dict[str, Any] = {"index": 0, "finish_reason": "length" if final else None}
            if api == "openai":
                choice["text"] = new
            else:
                choice["delta"] = {"content": new}
            event = {"object": "chunk", "choices": [choice], "server_send_time": now}
            if continuous:
                event["usage"] = _usage(prompt_tokens, sent)
        return b"data: " + json.dumps(event).encode() + b"\n\n"

    async def _stream(
        self, api: str, body: dict, prompt_tokens: int, max_tokens: int, seed: int, arrival: float
    ) -> None:
        options = self.server.options
        stream_options = body.get("stream_options") or {}
        continuous = bool(stream_options.get("continuous_usage_stats"))
        await self._write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        per_event = options.tokens_per_event
        interval = options.itl_ms / 1e3 * per_event
        # A TTFT in [ttft, ttft + jitter), spread evenly over requests (golden-ratio sequence).
        spread = (self.server.requests_seen * 0.6180339887) % 1.0
        first_due = arrival + (options.ttft_ms + options.ttft_jitter_ms * spread) / 1e3
        record = {
            "arrival": arrival,
            "first_send": None,
            "last_send": None,
            "tokens": 0,
            "events": 0,
            "max_tokens": max_tokens,
            "api": api,
            "prompt_digest": _digest(body),
        }
        sent, text, pending = 0, "", []
        while sent < max_tokens:
            delay = first_due + record["events"] * interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            count = min(per_event, max_tokens - sent)
            new = "".join(_token_text(seed, sent + i) for i in range(count))
            sent += count
            text += new if api == "sglang" else ""
            now = time.monotonic()
            pending.append(
                self._event(
                    api, continuous, prompt_tokens, sent, new, text, sent == max_tokens, now
                )
            )
            record["first_send"] = record["first_send"] or now
            record["last_send"], record["tokens"] = now, sent
            record["events"] += 1
            if interval > 0 or len(pending) >= options.events_per_write or sent == max_tokens:
                await self._chunk(b"".join(pending))
                pending.clear()
                if interval == 0:
                    await asyncio.sleep(0)
        if api != "sglang" and stream_options.get("include_usage"):
            await self._chunk(
                b"data: "
                + json.dumps({"choices": [], "usage": _usage(prompt_tokens, sent)}).encode()
                + b"\n\n"
            )
        await self._write(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
        self.server.records.append(record)

    async def _chunk(self, data: bytes) -> None:
        await self._write(b"%x\r\n%s\r\n" % (len(data), data))


async def _serve(options: argparse.Namespace) -> None:
    server = _Server(options)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", options.port))
    listener.listen(4096)
    listener.setblocking(False)
    loop = asyncio.get_running_loop()
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    connections: set[asyncio.Task[None]] = set()
    while True:
        sock, _ = await loop.sock_accept(listener)
        task = asyncio.ensure_future(_Connection(server, sock).serve())
        connections.add(task)
        task.add_done_callback(connections.discard)


def main(argv: list[str] | None = None) -> None:
    """Parse the options and serve until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ttft-ms", type=float, default=300.0)
    parser.add_argument("--ttft-jitter-ms", type=float, default=0.0)
    parser.add_argument("--itl-ms", type=float, default=20.0)
    parser.add_argument("--tokens-per-event", type=int, default=1)
    parser.add_argument("--events-per-write", type=int, default=1)
    parser.add_argument("--time-scale", type=float, default=None)
    parser.add_argument("--no-server-info", action="store_true")
    parser.add_argument("--fail-every", type=int, default=0)
    parser.add_argument("--model", default="pacing-model")
    asyncio.run(_serve(parser.parse_args(argv)))


class PacingServer(ChildServer):
    """The server in a child process of its own group; a context manager that always stops it.

    Args:
        options: command-line options without dashes, e.g. ``ttft_ms=300, itl_ms=20``.
    """

    def __init__(self, **options: Any) -> None:
        super().__init__(Path(__file__).resolve(), option_args(options), "pacing server")

    def kill(self) -> None:
        """SIGKILL the server's process group (as a crash would)."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
