"""One inference server's life on a host: start, wait until ready, watch for crashes, stop.

A background watcher follows the server's log and process every ``poll_s`` so that a crash is
noticed within a second or two, whatever phase the trial is in: the load generator polls
:meth:`ServerSession.failure` (a cheap read of what the watcher found) instead of a timeout.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass, field

from tuner.engines import EngineProfile
from tuner.errors import HostError, ServerFailure
from tuner.host import READ_BACK_S, Host, ServerHandle
from tuner.interrupts import CleanUpAbandoned
from tuner.observations import LogObserver

__all__ = ["ServerSession", "PhaseTimes", "LOG_TAIL_LINES"]

LOG_TAIL_LINES = 40


@dataclass
class PhaseTimes:
    """Monotonic timestamps (server seconds) of the phases of one server's life."""

    started: float | None = None
    ready: float | None = None
    stopped: float | None = None
    levels: dict[int, tuple[float, float]] = field(default_factory=dict)


class ServerSession:
    """Start one server, wait for readiness, watch it, and always stop it.

    Use as a context manager: the server is stopped on every exit path, Ctrl-C included.

    Args:
        host: where the server runs.
        profile: the engine profile (readiness endpoint, ready log line, crash signatures).
        argv: the full command line.
        env: the environment given to the server.
        port: the port it listens on (the client reaches it at ``host.address``).
        run_dir: the run folder on the host (log and PID files).
        stop_grace_s: SIGTERM-to-SIGKILL grace period.
        stop_command: a command that stops the server instead of signals (containers).
        poll_s: how often the watcher reads the log and checks the process.
    """

    def __init__(
        self,
        host: Host,
        profile: EngineProfile,
        argv: list[str],
        env: dict[str, str],
        port: int,
        run_dir: str,
        *,
        stop_grace_s: float = 30.0,
        stop_command: str | None = None,
        poll_s: float = 0.25,
    ) -> None:
        self.host = host
        self.profile = profile
        self.argv = argv
        self.env = env
        self.port = port
        self.run_dir = run_dir
        self.stop_grace_s = stop_grace_s
        self.stop_command = stop_command
        self.poll_s = poll_s
        self.handle: ServerHandle | None = None
        self.times = PhaseTimes()
        self.phase = "starting"
        # The numbers the profile's log patterns find (KV pool, running and queued requests).
        self.observer = LogObserver(profile.log_observations) if profile.log_observations else None
        self._tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self._offset = 0
        self._partial = ""
        self._ready_line_seen = False
        self._failure: ServerFailure | None = None
        self._lock = threading.Lock()
        self._stop_watch = threading.Event()
        self._watcher: threading.Thread | None = None
        self._connections = 0

    @property
    def base_url(self) -> str:
        return f"http://{self.host.address}:{self.port}"

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> "ServerSession":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ServerHandle:
        """Start the server detached, in its own process group, and begin watching it."""
        self.times.started = time.monotonic()
        try:
            self.handle = self.host.start_server(self.argv, env=self.env, run_dir=self.run_dir)
            self._connections = _connections(self.host)
            self._watcher = threading.Thread(target=self._watch, name="server-watcher", daemon=True)
            self._watcher.start()
        except CleanUpAbandoned:  # the user gave up on the host: no more calls to it
            raise
        except BaseException:  # Ctrl-C or a lost host mid-start: ``with`` will not call stop()
            self._stop_after_failed_start()
            raise
        return self.handle

    def stop(self) -> None:
        """Stop the watcher and the server (SIGTERM, then SIGKILL, then wait for the port)."""
        self._stop_watch.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        if self.handle is not None:
            try:
                self.host.stop_server(
                    self.handle,
                    grace_s=self.stop_grace_s,
                    port=self.port,
                    stop_command=self.stop_command,
                    env=self.env,
                )
            finally:
                self.times.stopped = time.monotonic()
                self._drain_log()

    def _stop_after_failed_start(self) -> None:
        """Stop a server whose start was cut short (its handle read back from the run folder when
        ``start_server`` did not return it), so that no server outlives an interrupted start."""
        try:
            if self.handle is None:
                self.handle = self.host.server_in(self.run_dir, wait_s=READ_BACK_S)
            self.stop()
        except Exception:  # the host is gone: the next run stops the server as an orphan
            pass

    # -- readiness ---------------------------------------------------------------------------

    def wait_ready(self, timeout_s: float) -> float:
        """Block until ``/health`` answers 200 or the ready log line appears.

        Returns:
            seconds (server time) from start to ready.

        Raises:
            ServerFailure: the server died or logged a fatal line first (``startup-crash``,
                ``oom-at-start``), or did not become ready in time (``timeout``).
        """
        assert self.times.started is not None, "start() first"
        deadline = time.monotonic() + timeout_s
        url = self.base_url + self.profile.health_path
        while True:
            failure = self.failure()
            if failure is not None:
                raise failure
            if self._ready_line_seen or _http_ok(url):
                self.times.ready = time.monotonic()
                self.phase = "ready"
                return self.times.ready - self.times.started
            if time.monotonic() > deadline:
                raise ServerFailure(
                    "timeout",
                    f"not ready after {timeout_s:.0f} s ({self.profile.health_path} never 200)",
                    self.log_excerpt(),
                )
            time.sleep(min(self.poll_s, 0.2))

    # -- watching ----------------------------------------------------------------------------

    def failure(self) -> ServerFailure | None:
        """What the watcher found wrong so far (None while the server looks healthy)."""
        with self._lock:
            return self._failure

    def wait_for_failure(self, timeout_s: float) -> ServerFailure | None:
        """The watcher's verdict, waiting up to ``timeout_s`` for one (None: the server lives)."""
        deadline = time.monotonic() + timeout_s
        while self.failure() is None and time.monotonic() < deadline:
            if self._watcher is None or not self._watcher.is_alive():
                break
            time.sleep(0.05)
        return self.failure()

    def stop_reason(self) -> str | None:
        """For the load generator's ``stop_check``: a one-line reason once the server broke."""
        failure = self.failure()
        return str(failure) if failure is not None else None

    def log_excerpt(self, lines: int = 25) -> str:
        """The last lines of the server's log."""
        with self._lock:
            return "\n".join(list(self._tail)[-lines:])

    def _watch(self) -> None:
        while not self._stop_watch.is_set():
            try:
                self._poll_once()
            except HostError as exc:  # the connection dropped: the trial cannot go on
                self._set_failure(ServerFailure("host-error", str(exc), self.log_excerpt()))
                return
            if self.failure() is not None:
                return
            self._stop_watch.wait(self.poll_s)

    def _poll_once(self) -> None:
        assert self.handle is not None
        if _connections(self.host) != self._connections:
            # Another step lost the SSH connection and a new one was opened: what happened on
            # the host meanwhile is unknown, so this trial's figures cannot be trusted.
            raise HostError(f"{self.host.name}: the SSH connection dropped during the trial")
        fatal = self._read_new_lines()
        if fatal is not None:
            # Let the process finish writing its traceback (SGLang exits within a second).
            time.sleep(min(1.0, 4 * self.poll_s))
            self._read_new_lines()
            self._set_failure(self._classify(fatal))
            return
        if not self.host.is_running(self.handle):
            self._read_new_lines()
            self._set_failure(self._classify(None))

    def _read_new_lines(self) -> str | None:
        """Read the log's new lines; return the first fatal one, if any."""
        assert self.handle is not None
        text, self._offset = self.host.read_log(self.handle, self._offset)
        if not text:
            return None
        text = self._partial + text
        lines = text.split("\n")
        self._partial = lines.pop()
        fatal = None
        with self._lock:
            for line in lines:
                self._tail.append(line)
                if self.profile.ready_log_pattern in line:
                    self._ready_line_seen = True
                if self.observer is not None:
                    self.observer.feed(line, self.phase)
                signature = self.profile.classify(line)
                if fatal is None and signature is not None and signature.fatal:
                    fatal = line
        return fatal

    def _drain_log(self) -> None:
        try:
            self._read_new_lines()
        except HostError:
            pass

    def _classify(self, fatal_line: str | None) -> ServerFailure:
        """Turn a fatal line (or a dead process) into a failure class for the current phase."""
        signature = self.profile.classify(fatal_line) if fatal_line else None
        excerpt = self.log_excerpt()
        kind = signature.reason if signature else "crash"
        # A dead process's log is read in full: an OOM line anywhere makes it an OOM.
        if kind == "crash" and any("out of memory" in ln.lower() for ln in excerpt.splitlines()):
            kind = "oom"
        detail = fatal_line.strip() if fatal_line else "the server process exited"
        if kind == "hang":
            return ServerFailure("hang", detail, excerpt)
        if self.phase.startswith("level-"):
            level = self.phase.removeprefix("level-")
            what = "out of memory" if kind == "oom" else "crash"
            return ServerFailure(f"unstable-at-{level}", f"{what}: {detail}", excerpt)
        if self.phase in ("ready", "probe"):
            return ServerFailure("startup-crash" if kind != "oom" else "oom-at-start", detail, excerpt)
        return ServerFailure("oom-at-start" if kind == "oom" else "startup-crash", detail, excerpt)

    def _set_failure(self, failure: ServerFailure) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = failure


def _connections(host: Host) -> int:
    """How many connections the host opened so far (0 for a local host)."""
    return int(getattr(host, "connections", 0))


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http_ok(url: str, timeout_s: float = 2.0) -> bool:
    try:
        with _NO_PROXY.open(url, timeout=timeout_s) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False
