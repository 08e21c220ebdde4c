"""One streamed request and the log it is recorded in: the hot path of the load generator.

The loop reads whatever bytes have arrived (one read per network chunk, not per line), takes
the time once for them, and per event only parses the JSON, reads the server's token count and
appends to two lists. Everything else (checks, percentiles) happens once per request or once
per level, after the fact.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import os
import time
from dataclasses import dataclass
from typing import Any

import aiohttp

from tuner.loadgen._apis import ApiFormat, RequestFailed

__all__ = [
    "JSON_HEADERS",
    "RequestLog",
    "RequestOutcome",
    "describe_error",
    "send_time_trace",
    "stream_request",
]

JSON_HEADERS = {"Content-Type": "application/json"}
_JSON = json.JSONDecoder()

# Status of a request in the log.
NOT_RUN, COMPLETED, FAILED = 0, 1, -1

# Errors meaning the server is gone (refused, reset, closed mid-stream), not merely unhappy.
# A connect that did not complete in time: on a starved client machine, the client's own doing.
CONNECT_TIMED_OUT = "no connection to the server within the connect timeout"
CONNECTION_ERRORS = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, ConnectionError)


async def _on_body_sent(
    session: aiohttp.ClientSession, context: object, params: aiohttp.TraceRequestChunkSentParams
) -> None:
    sent = getattr(context, "trace_request_ctx", None)
    if sent is not None and not sent["at"]:
        sent["at"] = time.perf_counter()


def send_time_trace() -> aiohttp.TraceConfig:
    """A trace that stamps when a request's body is handed to the socket.

    aiohttp writes a body in a task of its own, scheduled after the call that sends the
    request; in a burst of hundreds of requests that is milliseconds later. A request's clock
    starts at this stamp, so the client's own queueing is not counted as the server's latency.
    """
    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(_on_body_sent)
    return trace


@dataclass(frozen=True)
class RequestOutcome:
    """How one streamed request ended: ``ok``, else ``error`` (one line) and whether the
    connection was refused, reset or closed (``connection_lost``: the server may be gone)."""

    ok: bool
    error: str | None = None
    connection_lost: bool = False


class RequestLog:
    """Per-request records of one level, in lists allocated before the level starts.

    Times are ``time.perf_counter()`` seconds (the monotonic clock). ``event_counts[i][k]`` is
    the server's cumulative output-token count at event ``k`` of request ``i``, or None where
    the server sent text without a count. ``asked[i]`` is the output length request ``i`` asked
    for (0: not known); a completed request with fewer output tokens ended early (its model
    stopped: a strict server takes no ``ignore_eos``).
    """

    def __init__(self, size: int) -> None:
        self.size = size
        self.status = [NOT_RUN] * size
        self.start = [0.0] * size  # its arrival: when sent, or an emulator's arrival stamp
        self.sent = [0.0] * size  # when this client sent it, on its own clock (any server)
        self.due = [0.0] * size  # an open loop: when its schedule said to send it (0: closed loop)
        self.end = [0.0] * size
        self.event_times: list[list[float]] = [[] for _ in range(size)]
        self.event_counts: list[list[int | None]] = [[] for _ in range(size)]
        self.output_tokens = [0] * size
        self.input_tokens = [0] * size
        self.asked = [0] * size
        self.after = [-1] * size  # the request sent before this one in its slot (-1: first)
        self.first_stamp: float | None = None  # emulated servers: the earliest arrival stamp
        self.last_stamp = 0.0  # ... and the latest event stamp (their virtual clock)
        self.client_counted_inputs = 0  # completed requests whose prompt the server did not count

    def indices(self, status: int) -> list[int]:
        """The requests with this status (``COMPLETED``, ``FAILED`` or ``NOT_RUN``)."""
        return [i for i, value in enumerate(self.status) if value == status]


def describe_error(exc: BaseException) -> str:
    """A short one-line message for a failed request."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        errno = exc.os_error.errno
        reason = os.strerror(errno) if errno else str(exc.os_error)
        text = f"cannot connect to {exc.host}:{exc.port} ({reason})"
    elif isinstance(exc, aiohttp.ClientPayloadError):
        text = "connection closed in the middle of the stream"
    elif isinstance(exc, aiohttp.ServerDisconnectedError):
        text = "server closed the connection"
    elif isinstance(exc, aiohttp.ConnectionTimeoutError):
        # The connection itself did not complete in time (a server that does not accept, or a
        # client whose event loop is starved of CPU): not a server that went quiet mid-stream.
        text = CONNECT_TIMED_OUT
    elif isinstance(exc, asyncio.TimeoutError):
        text = "no data from the server within the read timeout"
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(f"{type(exc).__name__}: {text}".split())[:240]


def _prompt_tokens(event: dict[str, Any] | None) -> int | None:
    if not event:
        return None
    holder = event.get("usage") or event.get("meta_info") or {}
    value = holder.get("prompt_tokens")
    return int(value) if value is not None else None


async def stream_request(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    api: ApiFormat,
    log: RequestLog,
    index: int,
    prompt_len: int,
    stamped: bool = False,
    headers: dict[str, str] = JSON_HEADERS,
) -> RequestOutcome:
    """Send request ``index`` and record it in ``log``.

    With ``stamped`` (an emulated server, which says so on ``/server_info``) the request's
    times are the server's virtual-clock stamps (``emulator_clock: [arrived, now]`` on every
    event) instead of this process's clock, so the client's own lag cannot distort them; the
    code path is otherwise the same as against a real server.

    Returns:
        how it ended (:class:`RequestOutcome`).
    """
    perf = time.perf_counter
    parse = _JSON.raw_decode  # no per-event encoding detection or whitespace scan
    read_event = api.read_event
    times = log.event_times[index]
    counts = log.event_counts[index]
    server_count: int | None = None
    previous: int | None = None
    last_event: dict[str, Any] | None = None
    done = False
    finished_at: float | None = None  # when an event with a finish_reason came
    last_stamp = 0.0
    sent = {"at": 0.0}
    log.start[index] = log.sent[index] = perf()
    try:
        async with session.post(
            url, data=body, headers=headers, trace_request_ctx=sent
        ) as response:
            log.start[index] = log.sent[index] = sent["at"] or log.sent[index]
            if response.status != 200:
                detail = (await response.content.read(400)).decode("utf-8", "replace")
                raise RequestFailed(f"HTTP {response.status}: {' '.join(detail.split())[:200]}")
            # Read whatever has arrived, however many events that is: they all arrived at
            # this time, and one read per network chunk costs far less than one per line.
            decode = codecs.getincrementaldecoder("utf-8")("replace").decode
            partial = ""
            async for chunk in response.content.iter_any():
                now = perf()
                lines = (partial + decode(chunk)).split("\n")
                partial = lines.pop()
                for line in lines:
                    if line[:5] != "data:":
                        continue
                    try:
                        event = parse(line[6:] if line[5:6] == " " else line[5:])[0]
                    except ValueError:
                        if "[DONE]" in line:
                            # The stream ends here; read on to the end of the body all the
                            # same, so that the connection is reused.
                            done = True
                            log.end[index] = last_stamp if stamped else now
                            continue
                        raise RequestFailed(f"unreadable event: {line[:120]!r}") from None
                    content, count, finished = read_event(event)
                    if count is not None:
                        server_count = count
                    if stamped:
                        clock = event.get("emulator_clock")
                        if not clock:
                            raise RequestFailed("emulated server sent an event without its clock")
                        log.start[index], now = clock
                        last_stamp = now
                        if now > log.last_stamp:
                            log.last_stamp = now
                        if log.first_stamp is None or clock[0] < log.first_stamp:
                            log.first_stamp = clock[0]
                    if content and (count is None or count != previous):
                        times.append(now)
                        counts.append(count)
                        previous = count
                    if finished:
                        finished_at = now
                    last_event = event
        if not done:
            # A strict OpenAI server ends its stream after the event that carries the
            # finish_reason, without [DONE]: that stream is complete, one cut before it is not.
            if finished_at is None:
                raise RequestFailed("stream ended before [DONE] or a finish_reason")
            log.end[index] = finished_at
        if not times:
            raise RequestFailed("stream carried no generated text")
        total = server_count if server_count is not None else len(times)
        if total < len(times):
            raise RequestFailed(
                f"server counted {total} output tokens but streamed {len(times)} events of text"
            )
        log.output_tokens[index] = total
        server_prompt = _prompt_tokens(last_event)
        log.input_tokens[index] = server_prompt or prompt_len
        log.client_counted_inputs += server_prompt is None
        log.status[index] = COMPLETED
        return RequestOutcome(True)
    except RequestFailed as exc:
        log.status[index] = FAILED
        return RequestOutcome(False, str(exc))
    except CONNECTION_ERRORS as exc:
        log.status[index] = FAILED
        return RequestOutcome(False, describe_error(exc), connection_lost=True)
    except (TimeoutError, aiohttp.ClientError, ValueError, KeyError, TypeError) as exc:
        log.status[index] = FAILED
        return RequestOutcome(False, describe_error(exc))
