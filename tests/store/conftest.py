"""The store backends under test: SQLite (a file) and a real PostgreSQL server.

The PostgreSQL server is Debian's (postgres_server.py: Unix socket only, run as
``postgres`` when the tests run as root), in a temporary folder, once per test session. Every
test gets a fresh database on it.
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from .postgres_server import PostgresServer

BACKENDS = ("sqlite", "postgres")


@pytest.fixture(scope="session")
def postgres_server():
    root = Path(tempfile.mkdtemp(prefix="hpd-pg-", dir="/tmp"))
    server = PostgresServer(root).start()
    yield server
    try:
        server.stop("immediate")
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path):
    """(name, open): ``open(**options)`` opens a store of that backend on one fresh database
    (every call the same database: two opens are two daemons sharing it)."""
    if request.param == "sqlite":
        from hpcpredict.daemon.store import SQLiteStore

        path = str(tmp_path / "store.sqlite")
        return "sqlite", lambda **options: SQLiteStore(path, **options)
    from hpcpredict.daemon.store import PostgresStore

    dsn = request.getfixturevalue("postgres_server").new_database()
    return "postgres", lambda **options: PostgresStore(dsn, **options)


@pytest.fixture
def store(backend):
    opened = backend[1]()
    yield opened
    opened.close()
