"""A real ``python -m tuner.emulator`` process for the tests, stopped by its process group.

:class:`Emulator` starts the server in its own session (``start_new_session=True``), logs to a
file, waits for ``/health`` = 200 or for the process to end, and on :meth:`stop` (also on
``__exit__``, whatever happened) signals its process group: SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Self

from tests.support.sshd import free_port
from tuner.emulator import prepare_host_root
from tuner.emulator.calibration import FIXED_ARGV, CalibrationPoint

__all__ = ["BASE_ARGV", "REPO", "Emulator", "emulator_with_keys", "get_json", "patch_gate", "post_json",
           "prepare_calibration_host"]

REPO = Path(__file__).resolve().parents[2]
BASE_ARGV = (*FIXED_ARGV, "--moe-runner-backend", "flashinfer_cutlass",
             "--attention-backend", "flashinfer")


def get_json(url: str, timeout: float = 5.0) -> tuple[int, Any]:
    """``(status, document)`` of a GET (document None when not JSON; status 0: no answer)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read()
            status = response.status
    except urllib.error.HTTPError as error:
        return error.code, None
    except (urllib.error.URLError, OSError):
        return 0, None
    try:
        return status, json.loads(body)
    except ValueError:
        return status, None


def post_json(url: str, body: dict[str, Any], timeout: float = 30.0) -> tuple[int, bytes]:
    """``(status, raw body)`` of a JSON POST."""
    request = urllib.request.Request(url, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def patch_gate(site: Path) -> None:
    """Un-comment ``"flashinfer_cutlass",`` in the emulated host's autotune gate (the seeds' sed)."""
    path = site / "sglang/srt/model_executor/model_runner.py"
    path.write_text(path.read_text().replace('# "flashinfer_cutlass",', '"flashinfer_cutlass",'))


def force_allreduce(site: Path) -> None:
    """Apply glm5.yaml's ``force_allreduce_fusion`` patch to the emulated host's communicator."""
    from tuner.space import load_space
    patch = load_space(REPO / "search_spaces/glm5.yaml").patches["force_allreduce_fusion"]
    path = site / "sglang" / patch.file
    text = path.read_text()
    assert text.count(patch.find) == 1, f"{path}: the patch's find text is not there once"
    path.write_text(text.replace(patch.find, patch.replace))


class Emulator:
    """One emulated server process.

    Args:
        argv: launch flags (without ``--port``; one is picked).
        log_dir: where ``emulator.log`` goes.
        env: environment additions (e.g. from ``prepare_host_root``).
        time_scale: ``--time-scale``.
        seed: ``--emulator-seed``.
    """

    def __init__(self, argv: Sequence[str], log_dir: Path, *, env: dict[str, str] | None = None,
                 time_scale: float = 200.0, seed: int = 1) -> None:
        self.port = free_port()
        self.argv = [*argv, "--time-scale", str(time_scale), "--emulator-seed", str(seed),
                     "--port", str(self.port)]
        self.log_path = log_dir / f"emulator-{self.port}.log"
        extra = dict(env or {})
        pythonpath = [p for p in (extra.pop("PYTHONPATH", ""), str(REPO)) if p]
        self.env = {**os.environ, **extra, "PYTHONPATH": os.pathsep.join(pythonpath)}
        self.process: subprocess.Popen[bytes] | None = None
        self.base_url = f"http://127.0.0.1:{self.port}"

    def start(self) -> Self:
        """Start the process (returns at once); a second call starts nothing (``with
        Emulator(...).start()`` once started two servers on one port, the first never stopped)."""
        if self.process is not None:
            return self
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "tuner.emulator", *self.argv], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, env=self.env, cwd=str(self.log_path.parent),
                start_new_session=True,
            )
        return self

    def wait_ready(self, timeout: float = 30.0) -> bool:
        """Wait for ``/health`` = 200 (True) or for the process to end (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.returncode is not None:
                return False
            if get_json(f"{self.base_url}/health", timeout=1.0)[0] == 200:
                return True
            time.sleep(0.05)
        raise TimeoutError(f"emulator not ready within {timeout} s:\n{self.log()[-2000:]}")

    def wait_exit(self, timeout: float = 30.0) -> int:
        """Wait for the process to end; its exit code."""
        assert self.process is not None
        return self.process.wait(timeout)

    @property
    def returncode(self) -> int | None:
        return self.process.poll() if self.process is not None else None

    def log(self) -> str:
        """Everything the server printed so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        """SIGTERM to the process group, SIGKILL after 5 s; idempotent."""
        process = self.process
        if process is None:
            return
        for signum, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if process.poll() is not None:
                break
            try:
                os.killpg(process.pid, signum)
            except ProcessLookupError:
                break
            try:
                process.wait(wait)
            except subprocess.TimeoutExpired:
                continue

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def emulator_with_keys(root: Path, keys: dict[str, str]) -> Emulator:
    """An emulator (not started) that enforces ``keys`` (``{"--api-key": ..., "--admin-api-key":
    ...}``), given as SGLang takes them from the tuner: a ``--config`` file of secret flags."""
    from tuner.emulator import prepare_host_root
    from tuner.space._launch import secret_flags_yaml

    env = prepare_host_root(root)
    patch_gate(root / "site")
    config = root / "secret-flags.yaml"
    config.write_text(secret_flags_yaml(keys))
    return Emulator([*BASE_ARGV, "--config", str(config)], root, env=env, time_scale=100.0)


def prepare_calibration_host(point: CalibrationPoint, root: Path) -> dict[str, str]:
    """An emulated host whose sglang carries the point's patches."""
    env = prepare_host_root(root)
    if point.patched_gate:
        patch_gate(root / "site")
    if point.forced_allreduce:
        force_allreduce(root / "site")
    return env
