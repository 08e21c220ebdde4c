""":class:`LocalHost`: the host layer on the tuner's own machine, through ``/bin/sh``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from tuner.errors import HostError
from tuner.host import _shell
from tuner.host._base import Host
from tuner.host._run_root import DEFAULT_RUN_ROOT
from tuner.host._types import CommandResult

__all__ = ["LocalHost"]


class LocalHost(Host):
    """This machine. Commands run with ``/bin/sh -c`` in a session of their own.

    Args:
        run_root: the folder run folders live under.
    """

    def __init__(self, run_root: str = DEFAULT_RUN_ROOT) -> None:
        self.name = "local"
        self.address = "127.0.0.1"
        self.run_root = os.path.expanduser(run_root)

    def run(
        self, command: str, *, timeout: float = 60.0, env: Mapping[str, str] | None = None
    ) -> CommandResult:
        """Run ``command`` with ``/bin/sh``, the script on its stdin (never on a command line);
        on timeout its whole process group is killed."""
        script = _shell.env_exports(env) + command
        process = subprocess.Popen(
            ["/bin/sh", "-c", _shell.FROM_STDIN],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(script.encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process.pid)
            process.communicate()
            raise HostError(
                f"local: command timed out after {timeout:g} s: {_first_line(command)}"
            ) from None
        finally:
            if process.poll() is None:  # interrupted (KeyboardInterrupt): leave nothing behind
                _kill_group(process.pid)
                process.wait()
        return CommandResult(
            process.returncode,
            stdout.decode("utf-8", errors="replace"),
            stderr.decode("utf-8", errors="replace"),
        )

    def read_file(self, path: str) -> bytes:
        try:
            return Path(path).read_bytes()
        except OSError as error:
            raise HostError(f"local: cannot read {path}: {error.strerror or error}") from None

    def write_file(self, path: str, data: bytes, *, mode: int | None = None) -> None:
        target = Path(path)
        try:
            _make_private_dirs(target.parent)
            if mode is None:
                mode = target.stat().st_mode & 0o7777 if target.exists() else None
            # mkstemp creates it 0600: private before the first byte, whatever the umask
            handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
            try:
                with os.fdopen(handle, "wb") as stream:
                    stream.write(data)
                if mode is not None:
                    os.chmod(temporary, mode)
                os.replace(temporary, target)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as error:
            raise HostError(f"local: cannot write {path}: {error.strerror or error}") from None

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def fetch(self, remote_path: str, local_path: str) -> None:
        try:
            Path(local_path).parent.mkdir(parents=True, exist_ok=True)
            if Path(remote_path).resolve() != Path(local_path).resolve():
                shutil.copyfile(remote_path, local_path)
        except OSError as error:
            raise HostError(
                f"local: cannot copy {remote_path}: {error.strerror or error}"
            ) from None

    def _read_range(self, path: str, offset: int, limit: int) -> bytes:
        try:
            with open(path, "rb") as stream:
                stream.seek(offset)
                return stream.read(limit)
        except (FileNotFoundError, ProcessLookupError):
            return b""
        except OSError as error:
            raise HostError(f"local: cannot read {path}: {error.strerror or error}") from None


def _make_private_dirs(folder: Path) -> None:
    """Create ``folder`` and its missing parents, each 0700 from the moment it exists (the
    process umask can only take bits away)."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        if folder.parent == folder:
            break
        folder = folder.parent
    for each in reversed(missing):
        try:
            each.mkdir(mode=0o700)
        except FileExistsError:
            pass


def _kill_group(pgid: int) -> None:
    """SIGKILL the process group a command ran in (it is ours: started with a new session)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _first_line(command: str, limit: int = 120) -> str:
    line = command.strip().splitlines()[0] if command.strip() else ""
    return line if len(line) <= limit else line[:limit] + "..."
