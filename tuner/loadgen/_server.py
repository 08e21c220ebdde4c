"""Small questions to a running server: its time scale, its model name, one greedy completion.

Each call is bounded by ``timeout_s``. A server that does not answer raises a one-line
:class:`TunerError` (:class:`NoAnswerInTime` when the time ran out); a server without
``/server_info`` (vLLM answers 404) runs at K = 1.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import aiohttp

from tuner.errors import NoAnswerInTime, TunerError
from tuner.loadgen._apis import Dialect, api_format, as_dialect
from tuner.loadgen._prompts import Prompt
from tuner.loadgen._stream import JSON_HEADERS, describe_error
from tuner.timescale import TimeScale

GET_TIMEOUT_S = 5.0

__all__ = [
    "ServerAnswered",
    "auth_headers",
    "complete",
    "complete_async",
    "complete_many",
    "emulator_clock",
    "emulator_lag",
    "fetch_model",
    "fetch_model_name",
    "fetch_server_info",
    "fetch_time_scale",
    "fetch_time_scale_async",
]


class ServerAnswered(TunerError):
    """The server answered a request with an error status (``status``: 4xx, 5xx).

    A 5xx says the server is broken (a worker that died after ``/health`` said 200); a 4xx that
    it refused what the client sent. The caller decides which of the two the trial is.
    """

    def __init__(self, url: str, status: int, text: str) -> None:
        super().__init__(f"{url} answered HTTP {status}: {' '.join(text.split())[:200]}")
        self.status = status


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The headers that carry a server's API key (``Authorization: Bearer KEY``, as SGLang's
    and vLLM's ``--api-key`` require); none without a key."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def _timeout(timeout_s: float) -> aiohttp.ClientTimeout:
    return aiohttp.ClientTimeout(total=timeout_s, sock_connect=min(timeout_s, 10.0))


def _unreachable(url: str, exc: BaseException) -> TunerError:
    """The one-line error of a request without an answer: NoAnswerInTime when it timed out."""
    kind = NoAnswerInTime if isinstance(exc, TimeoutError) else TunerError
    return kind(
        f"{url}: does not answer ({describe_error(exc)}); fix: start the server or fix the URL"
    )


async def _get_json(
    session: aiohttp.ClientSession, url: str, timeout_s: float = GET_TIMEOUT_S
) -> tuple[int, Any]:
    """GET ``url``: ``(status, document or None)``; no answer at all raises TunerError."""
    try:
        async with session.get(url, timeout=_timeout(timeout_s)) as response:
            if response.status != 200:
                return response.status, None
            return 200, json.loads(await response.read())
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise _unreachable(url, exc) from None
    except ValueError:
        return 200, None


async def fetch_server_info(
    session: aiohttp.ClientSession, base_url: str, timeout_s: float = GET_TIMEOUT_S
) -> dict[str, Any] | None:
    """``GET {base_url}/server_info`` as a dict, or None (absent, 404, not JSON)."""
    status, info = await _get_json(session, f"{base_url.rstrip('/')}/server_info", timeout_s)
    return info if status == 200 and isinstance(info, dict) else None


def emulator_clock(info: dict[str, Any] | None) -> bool:
    """The server says it is the emulator, which stamps its events with its virtual clock."""
    emulator = (info or {}).get("emulator") or {}
    return bool(emulator.get("emulated"))


def emulator_lag(info: dict[str, Any] | None) -> float | None:
    """The most the emulator fell behind its schedule in its latest busy period (wall s)."""
    schedule = ((info or {}).get("emulator") or {}).get("schedule") or {}
    value = schedule.get("peak_lag_s")
    return float(value) if value is not None else None


async def fetch_time_scale_async(
    session: aiohttp.ClientSession, base_url: str, timeout_s: float = GET_TIMEOUT_S
) -> TimeScale:
    """Read ``emulator.time_scale`` from ``GET {base_url}/server_info`` (absent or 404: K=1)."""
    url = f"{base_url.rstrip('/')}/server_info"
    status, info = await _get_json(session, url, timeout_s)
    if status != 200 or not isinstance(info, dict):
        return TimeScale()
    try:
        return TimeScale.from_server_info(info)
    except (TypeError, ValueError) as exc:
        raise TunerError(
            f"{base_url}/server_info: emulator.time_scale is invalid: {exc}"
        ) from None


def fetch_time_scale(
    base_url: str, timeout_s: float = 5, headers: dict[str, str] | None = None
) -> TimeScale:
    """Synchronous :func:`fetch_time_scale_async` with its own session (``headers``: of every
    request, e.g. :func:`auth_headers`)."""

    async def _fetch() -> TimeScale:
        async with aiohttp.ClientSession(timeout=_timeout(timeout_s), headers=headers) as session:
            return await fetch_time_scale_async(session, base_url, timeout_s)

    return asyncio.run(_fetch())


def fetch_emulated_startup_s(
    base_url: str, timeout_s: float = 5, headers: dict[str, str] | None = None
) -> float | None:
    """The host seconds an emulated server's start-up stands for (``emulator.startup_s`` on
    ``/server_info``); None from a real server, or one that does not say."""

    async def _fetch() -> dict[str, Any] | None:
        async with aiohttp.ClientSession(timeout=_timeout(timeout_s), headers=headers) as session:
            return await fetch_server_info(session, base_url, timeout_s)

    try:
        value = ((asyncio.run(_fetch()) or {}).get("emulator") or {}).get("startup_s")
    except TunerError:
        return None
    return float(value) if isinstance(value, (int, float)) else None


MODEL_NAME_FIX = (
    "give the served model's name: `tuner bench --model NAME`, or workload.model "
    "(or server.model_path) in the search space"
)


async def fetch_model(session: aiohttp.ClientSession, base_url: str) -> str:
    """The served model name: ``data[0].id`` of ``GET {base_url}/v1/models``.

    Raises:
        TunerError: no name there (``transformers serve`` answers 500, or an empty list): the
            one-line message says how to give the name instead.
    """
    url = f"{base_url.rstrip('/')}/v1/models"
    status, document = await _get_json(session, url)
    try:
        return str(document["data"][0]["id"])
    except (TypeError, KeyError, IndexError):
        empty = status == 200 and document
        what = "an empty model list" if empty else f"{status} without data[0].id"
        raise TunerError(
            f"{url} answered {what}, so the model's name is unknown; fix: {MODEL_NAME_FIX}"
        ) from None


def fetch_model_name(
    base_url: str, timeout_s: float = GET_TIMEOUT_S, headers: dict[str, str] | None = None
) -> str:
    """Synchronous :func:`fetch_model` with its own session (``headers``: e.g. the API key's)."""

    async def _fetch() -> str:
        async with aiohttp.ClientSession(timeout=_timeout(timeout_s), headers=headers) as session:
            return await fetch_model(session, base_url)

    return asyncio.run(_fetch())


async def complete_async(
    session: aiohttp.ClientSession,
    base_url: str,
    api: str | Dialect,
    prompt: Prompt,
    max_tokens: int,
    model: str | None = None,
) -> str:
    """One non-streamed greedy completion (temperature 0) on an open session: its text.

    ``api``: an API's name or a :class:`Dialect`; ``model`` (else the dialect's, else
    ``/v1/models``) names the model in OpenAI requests.
    """
    dialect = as_dialect(api)
    fmt = api_format(dialect)
    base = base_url.rstrip("/")
    model = model or dialect.model
    if fmt.needs_model and model is None:
        model = await fetch_model(session, base)
    body = json.dumps(fmt.request(prompt, max_tokens, model, False)).encode()
    url = base + fmt.path
    try:
        async with session.post(url, data=body, headers=JSON_HEADERS) as response:
            text = await response.text()
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        raise _unreachable(url, exc) from None
    if response.status != 200:
        raise ServerAnswered(url, response.status, text)
    try:
        return fmt.read_text(json.loads(text))
    except (ValueError, KeyError, IndexError, TypeError):
        raise TunerError(f"{url} answered without generated text: {text[:200]!r}") from None


def complete_many(
    base_url: str,
    api: str | Dialect,
    prompts: Sequence[Prompt],
    max_tokens: int,
    timeout_s: float = 60,
    headers: dict[str, str] | None = None,
) -> list[str]:
    """Greedy completions of several prompts, sent concurrently; texts in prompt order
    (``headers``: of every request, e.g. :func:`auth_headers`)."""

    async def _run() -> list[str]:
        async with aiohttp.ClientSession(timeout=_timeout(timeout_s), headers=headers) as session:
            model = as_dialect(api).model
            if api_format(api).needs_model and model is None:
                model = await fetch_model(session, base_url)
            jobs = [
                complete_async(session, base_url, api, prompt, max_tokens, model)
                for prompt in prompts
            ]
            return list(await asyncio.gather(*jobs))

    return asyncio.run(_run())


def complete(
    base_url: str,
    api: str | Dialect,
    prompt_ids: Prompt,
    max_tokens: int,
    timeout_s: float = 60,
    headers: dict[str, str] | None = None,
) -> str:
    """One greedy completion of ``prompt_ids`` (token ids, or text): the generated text."""
    return complete_many(base_url, api, [prompt_ids], max_tokens, timeout_s, headers)[0]
