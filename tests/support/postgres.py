"""A real PostgreSQL 15 server on 127.0.0.1 for tests (Debian's package, no system service).

``initdb`` refuses to run as root, so the cluster belongs to the ``postgres`` user: its folder is
made with ``tempfile.mkdtemp`` (``tmp_path`` lies under a 0700 folder that user cannot enter),
handed to ``postgres``, and every PostgreSQL program runs through ``runuser -u postgres --``.
The server listens on 127.0.0.1 only, on a free port, with its socket in its own folder and trust
authentication (``initdb -A trust``); durability is off for speed. It is stopped with
``pg_ctl stop -m fast``, which signals the postmaster by the PID in its own PID file.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Self

from tests.support.sshd import free_port

__all__ = ["PG_BIN", "PostgresServer", "postgres_available"]

PG_BIN = Path("/usr/lib/postgresql/15/bin")
_SETTINGS = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{socket_dir}'
max_connections = 100
fsync = off
synchronous_commit = off
full_page_writes = off
"""


def postgres_available() -> str | None:
    """None when the binaries and ``runuser`` are there, else what is missing (for a skip)."""
    for program in ("initdb", "pg_ctl", "postgres", "psql"):
        if not os.access(PG_BIN / program, os.X_OK):
            return f"{PG_BIN / program} is missing: apt-get install -y postgresql"
    if shutil.which("runuser") is None:
        return "runuser is missing (util-linux)"
    return None


class PostgresServer:
    """One PostgreSQL cluster on 127.0.0.1:``port`` with a database ``tuner``.

    Attributes:
        port: the TCP port it listens on.
        directory: the cluster's folder (data, socket, log); removed by :meth:`stop`.
        url: the SQLAlchemy URL of the ``tuner`` database (user ``postgres``, no password;
            ``postgresql+psycopg2://``: SQLAlchemy 2.1 reads a bare ``postgresql://`` as psycopg 3).
    """

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="tuner-pg-"))
        self.data = self.directory / "data"
        self.socket_dir = self.directory / "socket"
        self.log_path = self.directory / "postgres.log"
        self.url = f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/tuner"
        self._started = False

    def _as_postgres(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["runuser", "-u", "postgres", "--", *argv],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
            cwd=self.directory,
            check=False,
        )
        if check and result.returncode != 0:
            log = self.log_path.read_text()[-800:] if self.log_path.exists() else ""
            raise RuntimeError(f"{argv[0]} exited {result.returncode}: {result.stderr} {log}")
        return result

    def start(self) -> None:
        """initdb, start, wait until it accepts connections, create the ``tuner`` database."""
        self.directory.chmod(0o755)
        self.socket_dir.mkdir()
        shutil.chown(self.directory, "postgres", "postgres")
        shutil.chown(self.socket_dir, "postgres", "postgres")
        self._as_postgres(
            str(PG_BIN / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        )
        with open(self.data / "postgresql.conf", "a") as conf:
            conf.write(_SETTINGS.format(port=self.port, socket_dir=self.socket_dir))
        self._started = True
        self._as_postgres(
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log_path),
            "-w",
            "-t",
            "30",
            "start",
        )
        self.create_database("tuner")

    def create_database(self, name: str) -> str:
        """Create another database; its URL."""
        self._as_postgres(
            str(PG_BIN / "psql"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-q",
            "-c",
            f'CREATE DATABASE "{name}"',
        )
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        """``pg_ctl stop -m fast`` and remove the cluster's folder; idempotent."""
        if self._started:
            self._started = False
            self._as_postgres(
                str(PG_BIN / "pg_ctl"),
                "-D",
                str(self.data),
                "-m",
                "fast",
                "-w",
                "-t",
                "30",
                "stop",
                check=False,
            )
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
