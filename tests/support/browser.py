"""Open a page in real headless Chromium and read what happened, over the DevTools protocol.

Chromium listens for DevTools on 127.0.0.1 only (port chosen by Chromium, read from its
``DevToolsActivePort`` file); a small aiohttp websocket client enables the Runtime, Log, Network
and Page domains, navigates to the file, waits for the load event and then until every plotly
figure has drawn its SVG (or a time limit). JavaScript exceptions, console errors and error log
entries are collected, and so is every URL the page requested. Name resolution is mapped away
(``--host-resolver-rules``), so the browser cannot reach any other host. The browser runs in its
own process group and is stopped on every path.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from itertools import count
from pathlib import Path
from typing import Any

import aiohttp

from tests.support.processes import stop_group

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-dev-shm-usage",
    "--no-pings",
    "--disable-domain-reliability",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
)

# How many plotly figures exist on the page, and how many have drawn their SVG.
FIGURES_JS = """JSON.stringify({
  figures: document.querySelectorAll('.js-plotly-plot').length,
  drawn: Array.from(document.querySelectorAll('.js-plotly-plot'))
              .filter(el => el.querySelector('.main-svg') !== null).length,
  divs: document.querySelectorAll('.plotly-graph-div').length,
  title: document.title,
})"""


@dataclass
class PageCheck:
    """What the browser saw: errors, requested URLs and the figures' state."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    figures: int = 0
    drawn: int = 0
    divs: int = 0
    title: str = ""

    @property
    def external_requests(self) -> list[str]:
        """Requests for anything but the file itself and inline data."""
        return [
            u for u in self.requests if not u.startswith(("file://", "data:", "blob:", "about:"))
        ]


def chromium_command(workdir: Path, *extra: str) -> list[str]:
    """The Chromium command line the tests use (profile under ``workdir``, no network services)."""
    return [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={workdir / 'profile'}", *extra]


def start_chromium(workdir: Path, *extra: str) -> subprocess.Popen:
    """Start Chromium in its own process group; ``HOME`` (so its crash database) in ``workdir``."""
    (workdir / "home").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(workdir / "home")}
    return subprocess.Popen(
        chromium_command(workdir, *extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )


def stop_chromium(process: subprocess.Popen, workdir: Path, grace: float = 5.0) -> None:
    """Stop the browser's process group, then wait for the crash handlers it started.

    Chromium's crashpad handlers run in sessions of their own and leave when the browser has gone;
    they are recognised by their crash database, which lies in this run's own ``workdir``.
    """
    stop_group(process, grace)
    deadline = time.monotonic() + grace
    while _crash_handlers(workdir) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in _crash_handlers(workdir):
        os.kill(pid, signal.SIGKILL)


def _crash_handlers(workdir: Path) -> list[int]:
    marker = f"--database={workdir / 'home'}/".encode()
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def _devtools_port(profile: Path, process: subprocess.Popen, timeout: float) -> int:
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marker.is_file() and marker.read_text().strip():
            return int(marker.read_text().splitlines()[0])
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with {process.returncode} before DevTools was up")
        time.sleep(0.05)
    raise TimeoutError("chromium did not open its DevTools port")


async def _inspect(port: int, url: str, expected_figures: int, timeout: float) -> PageCheck:
    check = PageCheck()
    ids = count(1)
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/json/list") as response:
            targets = await response.json()
        page = next(t for t in targets if t.get("type") == "page")
        async with session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
            pending: dict[int, asyncio.Future] = {}
            loaded = asyncio.Event()

            async def reader() -> None:
                try:
                    await read_events()
                except (
                    Exception
                ) as error:  # a broken reader must fail the waiting calls, not hang them
                    for future in pending.values():
                        future.set_exception(error)
                    raise

            async def read_events() -> None:
                async for message in ws:
                    data = json.loads(message.data)
                    if "id" in data and data["id"] in pending:
                        pending.pop(data["id"]).set_result(data)
                        continue
                    method, params = data.get("method"), data.get("params", {})
                    if method == "Runtime.exceptionThrown":
                        details = params["exceptionDetails"]
                        text = details.get("exception", {}).get("description") or details.get(
                            "text"
                        )
                        check.errors.append(f"exception: {text}")
                    elif method == "Runtime.consoleAPICalled" and params.get("type") in (
                        "error",
                        "assert",
                    ):
                        args = [
                            a.get("value") or a.get("description") for a in params.get("args", [])
                        ]
                        check.errors.append(f"console.{params['type']}: {args}")
                    elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                        check.errors.append(
                            f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}"
                        )
                    elif method == "Network.requestWillBeSent":
                        check.requests.append(params["request"]["url"])
                    elif method == "Page.loadEventFired":
                        loaded.set()

            async def call(method: str, **params: Any) -> dict[str, Any]:
                number = next(ids)
                pending[number] = asyncio.get_running_loop().create_future()
                await ws.send_json({"id": number, "method": method, "params": params})
                return await asyncio.wait_for(pending[number], timeout)

            task = asyncio.create_task(reader())
            try:
                for domain in ("Runtime", "Log", "Network", "Page"):
                    await call(f"{domain}.enable")
                await call("Page.navigate", url=url)
                await asyncio.wait_for(loaded.wait(), timeout)
                deadline = time.monotonic() + timeout
                while True:
                    result = await call(
                        "Runtime.evaluate", expression=FIGURES_JS, returnByValue=True
                    )
                    state = json.loads(result["result"]["result"]["value"])
                    check.figures, check.drawn = state["figures"], state["drawn"]
                    check.divs, check.title = state["divs"], state["title"]
                    if check.drawn >= expected_figures or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.2)
                await asyncio.sleep(0.3)  # late errors (resize handlers, deferred draws)
            finally:
                task.cancel()
    return check


def inspect_page(
    path: Path, workdir: Path, expected_figures: int, timeout: float = 60.0
) -> PageCheck:
    """Open ``path`` in headless Chromium and return what it saw (see :class:`PageCheck`)."""
    process = start_chromium(
        workdir, "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank"
    )
    try:
        port = _devtools_port(workdir / "profile", process, timeout)
        return asyncio.run(_inspect(port, path.resolve().as_uri(), expected_figures, timeout))
    finally:
        stop_chromium(process, workdir)


def _address(page: Path | str) -> str:
    """A file as its ``file://`` URI; a URL (a dashboard on 127.0.0.1) as it is."""
    return page if isinstance(page, str) else page.resolve().as_uri()


def dump_dom(page: Path | str, workdir: Path, budget_ms: int = 8000) -> str:
    """``chromium --headless --dump-dom``: the page's DOM once its scripts ran (``budget_ms`` of
    virtual time), as text."""
    (workdir / "home").mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        chromium_command(workdir, f"--virtual-time-budget={budget_ms}", "--dump-dom", _address(page)),
        capture_output=True, text=True, timeout=120, start_new_session=True,
        env={**os.environ, "HOME": str(workdir / "home")},
    )
    return done.stdout


def screenshot(
    path: Path | str, out: Path, workdir: Path, width: int = 1400, height: int = 2400
) -> Path:
    """``chromium --headless --screenshot`` of ``path`` (a file or a URL) at ``width`` x ``height``."""
    process = start_chromium(
        workdir,
        f"--screenshot={out.resolve()}",
        f"--window-size={width},{height}",
        "--hide-scrollbars",
        "--virtual-time-budget=8000",
        _address(path),
    )
    try:
        process.wait(timeout=120)
    finally:
        stop_chromium(process, workdir)
    if not out.is_file():
        raise RuntimeError(f"chromium wrote no screenshot (exit {process.returncode})")
    return out
