"""The replayed history in a PostgreSQL database, for the history benchmark.

The server (tests/store/postgres_server.py) lives in a folder of the benchmark cache, kept between
runs, so a history built once is reused; the server is stopped at the end of each run.
"""
from __future__ import annotations

import time

from hpcpredict.daemon.store import PostgresStore
from tests.store.postgres_server import PostgresServer  # for the type

from .build import fill_store


def build_postgres_store(server: PostgresServer, total: int) -> tuple[str, dict]:
    """(DSN, build facts): database ``jobs_<total>`` holding ``total`` replayed jobs (the same
    stream as the SQLite store of build.py), added through PostgresStore.add_jobs (the ingest
    path); reused when it already holds them."""
    name = f"jobs_{total}"
    dsn = server.database(name)
    started = time.perf_counter()
    store = PostgresStore(dsn)
    opened = time.perf_counter() - started
    facts = fill_store(store, total, opened, f"database {name}")
    return dsn, {**facts, "database_mib": server.size_mib(name)}
