"""Fixtures of the scale tests: a real PostgreSQL server on 127.0.0.1 for the whole session.

``postgres_server`` skips with a clear message where Debian's ``postgresql`` package is missing
(``.ci/run`` installs it); ``postgres_url`` is its ``tuner`` database.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.postgres import PostgresServer, postgres_available


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A running PostgreSQL 15 on 127.0.0.1 (stopped with ``pg_ctl stop -m fast`` at the end)."""
    missing = postgres_available()
    if missing:
        pytest.skip(missing)
    with PostgresServer() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """``postgresql+psycopg2://postgres@127.0.0.1:<port>/tuner``."""
    return postgres_server.url
