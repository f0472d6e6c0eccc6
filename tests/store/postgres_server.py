"""A throwaway PostgreSQL server, for the store tests and the history benchmark (which imports it
from here: one home).

Debian's PostgreSQL (``postgresql`` in contrib/apt-packages.txt): ``initdb`` into a folder,
``pg_ctl start`` listening only on a Unix socket there, run as ``postgres`` when the caller is
root (PostgreSQL refuses root). Server settings are the package defaults (shared_buffers
128 MB, fsync on). A folder that already holds a server's data is reused.
"""
from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import uuid
from pathlib import Path


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    path = found[-1] if found else shutil.which(name)
    if not path:
        raise RuntimeError(f"PostgreSQL's {name} not found: apt-get install postgresql (contrib/apt-packages.txt)")
    return path


class PostgresServer:
    """One PostgreSQL server in ``root`` (data in root/data, socket in root/run)."""

    def __init__(self, root: Path):
        self.root, self.data, self.socket_dir = root, root / "data", root / "run"
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        self.user = pwd.getpwuid(os.getuid()).pw_name
        self._as: list[str] = []
        if os.geteuid() == 0:
            self.user = "postgres"
            account = pwd.getpwnam(self.user)
            for path in (root, self.socket_dir):
                os.chown(path, account.pw_uid, account.pw_gid)
            os.chmod(root, 0o755)
            self._as = ["runuser", "-u", self.user, "--"]

    def _run(self, *argv: str) -> None:
        done = subprocess.run([*self._as, *argv], capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {done.stdout}\n{done.stderr}")

    def start(self) -> "PostgresServer":
        """Start the server, creating its data folder first when it holds none."""
        if not (self.data / "PG_VERSION").exists():
            self._run(_pg_bin("initdb"), "-D", str(self.data), "--auth=trust", "--username", self.user, "-E", "UTF8")
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "server.log"), "-w", "-t", "120",
                  "-o", f"-k {self.socket_dir} -c listen_addresses=''", "start")
        return self

    def dsn(self, database: str = "postgres") -> str:
        return f"host={self.socket_dir} dbname={database} user={self.user}"

    def database(self, name: str) -> str:
        """The DSN of database ``name``, created when missing."""
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as db:
            if not db.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                db.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def new_database(self) -> str:
        """The DSN of a new database with a unique name (one per test)."""
        return self.database(f"t_{uuid.uuid4().hex[:12]}")

    def size_mib(self, name: str) -> int:
        import psycopg

        with psycopg.connect(self.dsn(), autocommit=True) as db:
            return round(db.execute("SELECT pg_database_size(%s)", (name,)).fetchone()[0] / 2**20)

    def server_rss_mib(self) -> int:
        """Summed peak RSS (VmHWM) of the server's processes now: postmaster and backends
        (shared buffers are counted in each process that touched them, so this over-counts)."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        pids = [pid] + [int(p) for p in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True,
                                                          text=True).stdout.split()]
        total = 0
        for one in pids:
            try:
                status = Path(f"/proc/{one}/status").read_text()
            except OSError:
                continue
            total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM")), 0)
        return round(total / 1024)

    def stop(self, mode: str = "fast") -> None:
        """``fast`` lets the server write a checkpoint (the folder is reused); ``immediate``
        does not (a folder thrown away next)."""
        self._run(_pg_bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")
