"""The store backends under test: SQLite (a file) and a real PostgreSQL server.

The PostgreSQL server is Debian's (`postgresql` in contrib/apt-packages.txt): ``initdb`` in a
temporary folder and ``pg_ctl start`` listening only on a Unix socket there, once per test
session, run as an unprivileged user (PostgreSQL refuses to run as root: as root the tests
run it as ``postgres``). Every test gets a fresh database on it.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

BACKENDS = ("sqlite", "postgres")


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    path = found[-1] if found else shutil.which(name)
    if not path:
        pytest.fail(f"PostgreSQL's {name} not found: apt-get install postgresql (contrib/apt-packages.txt)")
    return path


class PostgresServer:
    """One real PostgreSQL server in a temporary folder (Unix socket only)."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="hpd-pg-", dir="/tmp"))
        self.data, self.socket_dir = self.root / "data", self.root / "run"
        self.socket_dir.mkdir()
        self.user = pwd.getpwuid(os.getuid()).pw_name
        self._as = []
        if os.geteuid() == 0:
            self.user = "postgres"
            account = pwd.getpwnam(self.user)
            os.chown(self.root, account.pw_uid, account.pw_gid)
            os.chown(self.socket_dir, account.pw_uid, account.pw_gid)
            os.chmod(self.root, 0o755)
            self._as = ["runuser", "-u", self.user, "--"]

    def _run(self, *argv: str) -> None:
        done = subprocess.run([*self._as, *argv], capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stdout}\n{done.stderr}")

    def start(self) -> "PostgresServer":
        self._run(_pg_bin("initdb"), "-D", str(self.data), "--auth=trust", "--username", self.user, "-E", "UTF8",
                  "--no-sync")
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "server.log"), "-w", "-t", "60",
                  "-o", f"-k {self.socket_dir} -c listen_addresses='' -c fsync=on", "start")
        return self

    def dsn(self, database: str = "postgres") -> str:
        return f"host={self.socket_dir} dbname={database} user={self.user}"

    def new_database(self) -> str:
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn(), autocommit=True) as db:
            db.execute(f"CREATE DATABASE {name}")
        return self.dsn(name)

    def stop(self) -> None:
        try:
            self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server():
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path):
    """(name, open): ``open(**options)`` opens a store of that backend on one fresh database
    (every call the same database: two opens are two daemons sharing it)."""
    if request.param == "sqlite":
        from hpcpredict.daemon.store import SQLiteStore

        path = str(tmp_path / "store.sqlite")
        return "sqlite", lambda **options: SQLiteStore(path, **options)
    from hpcpredict.daemon.store_postgres import PostgresStore

    dsn = request.getfixturevalue("postgres_server").new_database()
    return "postgres", lambda **options: PostgresStore(dsn, **options)


@pytest.fixture
def store(backend):
    opened = backend[1]()
    yield opened
    opened.close()
