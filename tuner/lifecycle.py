"""One inference server's life on a host: start, wait until ready, watch for crashes, stop.

A background watcher follows the server's log and process every ``poll_s`` so that a crash is
noticed within a second or two, whatever phase the trial is in: the load generator polls
:meth:`ServerSession.failure` (a cheap read of what the watcher found) instead of a timeout.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Mapping, Sequence
import urllib.error
import urllib.request
from collections import deque
from dataclasses import dataclass, field

from tuner.crash_cause import crash_cause
from tuner.engines import EngineProfile
from tuner.errors import ConfigError, HostError, ServerFailure
from tuner.failures import FailureClass
from tuner.handover import HANDOVER_TIMEOUT_S, GpuState, memory_held_elsewhere, wait_until_idle
from tuner.host import READ_BACK_S, Host, ServerHandle
from tuner.interrupts import CleanUpAbandoned
from tuner.loadgen import auth_headers
from tuner.signals import LogObserver, MetricsObserver
from tuner.scrub import Scrubber
from tuner.space._launch import FlagValue, secret_flags_yaml

__all__ = ["ServerSession", "PhaseTimes", "LOG_TAIL_LINES"]

LOG_TAIL_LINES = 40
# after a fatal line that opens a traceback, how long the watcher waits for the cause
FATAL_WRITE_S = 5.0


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
        port: the port it listens on (the client reaches it at :attr:`base_url`).
        run_dir: the run folder on the host (log and PID files).
        stop_grace_s: SIGTERM-to-SIGKILL grace period.
        stop_command: a command that stops the server instead of signals (containers).
        poll_s: how often the watcher reads the log and checks the process.
        idle_gpus: the GPUs' state measured at preflight: the start first waits until the GPUs
            the server uses (``CUDA_VISIBLE_DEVICES``, its device flags) are back to it
            (:mod:`tuner.handover`), and a start that fails out of memory while a process not
            there at preflight holds memory on them is ``host-error``, not the configuration's
            fault.
        handover_timeout_s: how long the start waits for that (then ``host-error``).
        secret_flags: flags that carry secrets (``{"--api-key": value}``): written to a 0600 file
            in the run folder, given to the server with the engine's ``config_flag``, never on
            its command line; the file is removed when the server stops, and when its start
            fails, whether or not a server was started.
        secrets: other secret values of the launch (secret variables of ``env``): these and the
            secret flags' values are replaced by ``***`` in every log line the session reads,
            so its excerpts, failures and observations never show them.
        api_key: the key the server requires from clients (the engine's ``api_key_flag``):
            :attr:`client_headers` carries it as ``Authorization: Bearer ...``.
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
        idle_gpus: GpuState | None = None,
        handover_timeout_s: float = HANDOVER_TIMEOUT_S,
        secret_flags: Mapping[str, FlagValue] | None = None,
        secrets: Sequence[str] = (),
        api_key: str | None = None,
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
        self.idle_gpus = idle_gpus
        self.handover_timeout_s = handover_timeout_s
        self.handover_wait_s = 0.0
        self.secret_flags = dict(secret_flags or {})
        self.scrubber = Scrubber.of(
            [*secrets, *(v for v in self.secret_flags.values() if isinstance(v, str))]
        )
        self.client_headers: dict[str, str] = auth_headers(api_key)
        self._secret_file: str | None = None  # set before it is written: removed on every path
        self.handle: ServerHandle | None = None
        self.times = PhaseTimes()
        self.phase = "starting"
        # The numbers the profile's log patterns find (KV pool, running and queued requests).
        self.observer = LogObserver(profile.log_observations) if profile.log_observations else None
        # ... and what its /metrics say, sampled by the client during each level (tuner.signals).
        self.metrics = (
            MetricsObserver(profile.metrics_observations, profile.metrics_path)
            if profile.metrics_observations
            else None
        )
        self._tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
        self._offset = 0
        self._partial = ""
        self._ready_line_seen = False
        self._failure: ServerFailure | None = None
        self._lock = threading.Lock()
        self._stop_watch = threading.Event()
        self._watcher: threading.Thread | None = None
        self._connections = 0
        self._base_url: str | None = None

    @property
    def base_url(self) -> str:
        """Where the client reaches the server: over SSH, a local port forwarded to the host's
        loopback when the server binds it (the default: nothing on the network reaches it)."""
        if self._base_url is None:
            self._base_url = self.host.client_url(
                self.port, _bind(self.argv, self.profile.host_flag)
            )
        return self._base_url

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> "ServerSession":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ServerHandle:
        """Wait until the GPUs are idle again, then start the server detached, in its own
        process group, and begin watching it.

        Raises:
            ServerFailure: ``host-error`` when the GPUs are not idle within the time limit.
            RuntimeError: the session was started before (``with session:`` starts it): a
                second server and a second watcher would share one log offset.
        """
        if self.handle is not None or self._watcher is not None:
            raise RuntimeError(
                f"ServerSession.start(): already started (PID {self.handle.pid if self.handle else '?'}); "
                "`with session:` starts it, start() once"
            )
        if self.idle_gpus is not None:
            try:
                self.handover_wait_s = wait_until_idle(
                    self.host,
                    self.idle_gpus,
                    self.env,
                    argv=self.argv,
                    timeout_s=self.handover_timeout_s,
                )
            except HostError as error:
                raise ServerFailure(FailureClass.HOST_ERROR, str(error), "") from None
        self.times.started = time.monotonic()
        try:
            argv = self.argv + self._secret_file_args()
            self.handle = self.host.start_server(argv, env=self.env, run_dir=self.run_dir)
            self._connections = _connections(self.host)
            # started before it is kept: an interrupt between the two would leave stop() joining
            # a thread never started (RuntimeError), seen under heavy load
            watcher = threading.Thread(target=self._watch, name="server-watcher", daemon=True)
            watcher.start()
            self._watcher = watcher
        except CleanUpAbandoned:  # the user gave up on the host: no more calls to it
            raise
        except BaseException:  # Ctrl-C or a lost host mid-start: ``with`` will not call stop()
            self._stop_after_failed_start()
            raise
        return self.handle

    def _secret_file_args(self) -> list[str]:
        """``[config_flag, FILE]`` after writing the secret flags to FILE (0600), or ``[]``."""
        if not self.secret_flags:
            return []
        if not self.profile.config_flag:
            raise ConfigError(
                f"engine {self.profile.name} reads no flags from a file: "
                "pass secrets through server.env"
            )
        self._secret_file = f"{self.run_dir.rstrip('/')}/secret-flags.yaml"
        # created 0600 in a run folder created 0700 (Host.write_file): never readable by others
        self.host.write_file(
            self._secret_file, secret_flags_yaml(self.secret_flags).encode(), mode=0o600
        )
        return [self.profile.config_flag, self._secret_file]

    def _remove_secret_file(self) -> None:
        if self._secret_file is not None:
            try:
                self.host.run(f"rm -f -- {shlex.quote(self._secret_file)}", timeout=30.0)
                self._secret_file = None
            except HostError:
                pass  # in a 0700 run folder, mode 0600: removed with the folder later

    def stop(self) -> None:
        """Stop the watcher and the server (SIGTERM, then SIGKILL, then wait for the port)."""
        self._stop_watch.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        try:
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
        finally:  # also when the start failed before a server handle existed
            self._remove_secret_file()

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

    def wait_ready(self, timeout_s: float, poll_s: float | None = None) -> float:
        """Block until ``/health`` answers 200 or the ready log line appears, asking every
        ``poll_s`` (default: the watcher's period, at most 0.2 s).

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
                    FailureClass.TIMEOUT,
                    f"not ready after {timeout_s:.0f} s ({self.profile.health_path} never 200)",
                    self.log_excerpt(),
                )
            time.sleep(min(self.poll_s, 0.2) if poll_s is None else poll_s)

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
                self._set_failure(
                    ServerFailure(FailureClass.HOST_ERROR, str(exc), self.log_excerpt())
                )
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
            # Let the process finish writing its traceback. A fatal line that opens one
            # (``Scheduler hit an exception: Traceback ...``) is followed by the cause in a later
            # write: read until the cause is there or the process exited (a busy machine or a
            # slow SSH link spreads those writes out), at most FATAL_WRITE_S. Otherwise one more
            # read a moment later.
            if "Traceback" in fatal:
                deadline = time.monotonic() + FATAL_WRITE_S
                while (
                    self._cause_after(fatal) is None
                    and time.monotonic() < deadline
                    and self.host.is_running(self.handle)
                ):
                    time.sleep(min(0.1, self.poll_s))
                    self._read_new_lines()
            else:
                time.sleep(min(1.0, 4 * self.poll_s))
            self._read_new_lines()
            self._set_failure(self._classify(fatal))
            return
        if not self.host.is_running(self.handle):
            # It may have written its fatal line after the read above, then exited: that line,
            # if the last read finds one, says why it died (a busy machine widens that window).
            self._set_failure(self._classify(self._read_new_lines()))

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
            for line in map(self.scrubber.text, lines):  # no secret kept, shown or stored
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
        kind = signature.reason if signature else FailureClass.STARTUP_CRASH
        # A dead process's log is read in full: an OOM line anywhere makes it an OOM.
        if kind is FailureClass.STARTUP_CRASH and any(
            "out of memory" in ln.lower() for ln in excerpt.splitlines()
        ):
            kind = FailureClass.OOM_AT_START
        detail = self._crash_detail(fatal_line)
        if kind in (FailureClass.HANG, FailureClass.HOST_ERROR):  # a host error: the port taken
            return ServerFailure(kind, detail, excerpt)
        if self.phase.startswith("level-"):
            level = self.phase.removeprefix("level-")
            what = "out of memory" if kind is FailureClass.OOM_AT_START else "crash"
            return ServerFailure(FailureClass.UNSTABLE.at(level), f"{what}: {detail}", excerpt)
        if kind is FailureClass.OOM_AT_START:
            held = self._memory_held_elsewhere()
            if held:
                return ServerFailure(
                    FailureClass.HOST_ERROR,
                    f"out of memory at start while other processes held GPU memory ({held}): "
                    f"not this configuration's fault; it runs again later ({detail})",
                    excerpt,
                )
            return ServerFailure(FailureClass.OOM_AT_START, detail, excerpt)
        return ServerFailure(FailureClass.STARTUP_CRASH, detail, excerpt)

    def _memory_held_elsewhere(self) -> str | None:
        """The processes not of this server that hold memory on its GPUs now and did not at
        preflight (None: none, or no idle state to compare with)."""
        if self.idle_gpus is None or self.handle is None:
            return None
        return memory_held_elsewhere(
            self.host, self.handle.pgid, self.env, idle=self.idle_gpus, argv=self.argv
        )

    def _crash_detail(self, fatal_line: str | None) -> str:
        """The error that caused the crash (the traceback's last line), else the fatal line."""
        with self._lock:
            tail = list(self._tail)
        if fatal_line is None:
            start = max((i for i, ln in enumerate(tail) if "Traceback" in ln), default=None)
            cause = crash_cause(tail[start], tail[start + 1 :]) if start is not None else None
            return f"the server process exited ({cause})" if cause else "the server process exited"
        return self._cause_after(fatal_line) or fatal_line.strip()

    def _cause_after(self, fatal_line: str) -> str | None:
        """The exception the log names after ``fatal_line`` (or in it), None if none yet."""
        with self._lock:
            tail = list(self._tail)
        index = max((i for i, ln in enumerate(tail) if ln == fatal_line), default=len(tail))
        return crash_cause(fatal_line, tail[index + 1 :])

    def _set_failure(self, failure: ServerFailure) -> None:
        with self._lock:
            if self._failure is None:
                self._failure = failure


def _bind(argv: list[str], flag: str) -> str | None:
    """The value of the engine's bind flag (``--host``) in ``argv``, if any."""
    for index, word in enumerate(argv):
        if word == flag and index + 1 < len(argv):
            return argv[index + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return None


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
