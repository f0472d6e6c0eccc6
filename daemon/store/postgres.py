"""The PostgreSQL store: the same :class:`~.sqlite.Store` interface on a shared server.

For sites that run a daemon on both slurmctld hosts (primary and backup) or several clusters
against one history: every daemon and admin command connects to the same database. Chosen by
``[store] backend = "postgres"`` with ``[store] dsn`` (a libpq connection string, e.g.
``host=/run/postgresql dbname=hpcpredict``); SQLite stays the embedded default.

Durability: an outcome is acknowledged after its transaction commits with the server's
``synchronous_commit`` (on by default: the WAL is flushed), so neither ``kill -9`` of a daemon
nor of the server loses it. Prediction records commit with ``synchronous_commit = off`` for
their own transaction (the server may lose the last few on a crash of the *server*, never on
one of the daemon: the commit has reached the server before the reply) — the same trade as the
SQLite store's predictions without fsync. There is no local journal: the server is the journal.

Schema changes are numbered like the SQLite ones (table ``hpcpredict_schema``) and applied
under an advisory lock, so two daemons starting together migrate once. SQL shared with SQLite
(:mod:`.lookups`) is written with ``?`` placeholders and translated here.
"""
from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Iterable, Iterator

from ..errors import StoreError
from ..records import JobRecord
from .sqlite import STREAM_BATCH_ROWS, Store
from .lookups import StoreLookups
from .rows import (
    JOB_COLUMNS,
    PREDICTION_COLUMNS,
    PredictionRow,
    job_from_row,
    job_values,
    prediction_for_job_where,
    prediction_from_values,
    prediction_values,
    quoted,
)

logger = logging.getLogger(__name__)

MIGRATIONS: tuple[str, ...] = (
    # 1: the schema the SQLite store reaches at its level 3 (clusters, streaming indexes)
    """
    CREATE TABLE jobs (
        id BIGSERIAL PRIMARY KEY,
        cluster TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL,
        job_id TEXT NOT NULL,
        "user" TEXT NOT NULL,
        grp TEXT NOT NULL DEFAULT '',
        account TEXT NOT NULL DEFAULT '',
        partition TEXT NOT NULL DEFAULT '',
        qos TEXT NOT NULL DEFAULT '',
        application TEXT NOT NULL DEFAULT '',
        job_name TEXT NOT NULL DEFAULT '',
        nodes INTEGER NOT NULL DEFAULT 0,
        requested_procs INTEGER NOT NULL DEFAULT 0,
        allocated_procs INTEGER NOT NULL DEFAULT 0,
        requested_time_s DOUBLE PRECISION NOT NULL DEFAULT 0,
        submit_time DOUBLE PRECISION NOT NULL,
        start_time DOUBLE PRECISION NOT NULL DEFAULT -1,
        end_time DOUBLE PRECISION NOT NULL DEFAULT -1,
        runtime_s DOUBLE PRECISION NOT NULL,
        state TEXT NOT NULL,
        exit_code INTEGER NOT NULL DEFAULT 0,
        inputs TEXT NOT NULL DEFAULT '{}',
        prediction_id TEXT NOT NULL DEFAULT '',
        node_list TEXT NOT NULL DEFAULT '',
        stored_at DOUBLE PRECISION NOT NULL,
        UNIQUE (cluster, source, job_id)
    );
    CREATE INDEX jobs_end ON jobs (end_time);
    CREATE INDEX jobs_submit ON jobs (submit_time, end_time, id);
    CREATE INDEX jobs_user_end ON jobs ("user", end_time);
    CREATE INDEX jobs_user_app_end ON jobs ("user", application, end_time);
    CREATE INDEX jobs_cluster_job ON jobs (cluster, job_id);
    CREATE TABLE predictions (
        prediction_id TEXT PRIMARY KEY,
        job_id TEXT NOT NULL DEFAULT '',
        stage TEXT NOT NULL,
        "user" TEXT NOT NULL DEFAULT '',
        application TEXT NOT NULL DEFAULT '',
        created DOUBLE PRECISION NOT NULL,
        runtime_s DOUBLE PRECISION NOT NULL,
        low_s DOUBLE PRECISION NOT NULL,
        high_s DOUBLE PRECISION NOT NULL,
        bound_s DOUBLE PRECISION NOT NULL,
        requested_time_s DOUBLE PRECISION NOT NULL DEFAULT 0,
        comm_time_s DOUBLE PRECISION,
        model_name TEXT NOT NULL,
        model_version TEXT NOT NULL,
        fallback INTEGER NOT NULL,
        request BYTEA,
        cluster TEXT NOT NULL DEFAULT ''
    );
    CREATE INDEX predictions_job ON predictions (job_id, cluster);
    """,
    # 2: the SQLite store's level 4 (the limits decided for the submission hook)
    """
    ALTER TABLE predictions ADD COLUMN applied_time_limit_s INTEGER;
    ALTER TABLE predictions ADD COLUMN applied_time_min_s INTEGER;
    ALTER TABLE predictions ADD COLUMN policy_mode TEXT NOT NULL DEFAULT '';
    ALTER TABLE predictions ADD COLUMN policy_reason TEXT NOT NULL DEFAULT '';
    """,
    # 3: the SQLite store's level 5 (decided apart from what PrologSlurmctld read back)
    """
    ALTER TABLE predictions RENAME COLUMN applied_time_limit_s TO decided_time_limit_s;
    ALTER TABLE predictions RENAME COLUMN applied_time_min_s TO decided_time_min_s;
    ALTER TABLE predictions ADD COLUMN started_time_limit_s INTEGER;
    ALTER TABLE predictions ADD COLUMN started_time_min_s INTEGER;
    """,
    # 4: the SQLite store's level 6 (the --time suggested in the answer)
    """
    ALTER TABLE predictions ADD COLUMN suggested_time_limit_s INTEGER;
    """,
)
_MIGRATION_LOCK = 0x68706370   # pg_advisory_xact_lock key: "hpcp"

_COLUMNS = quoted(JOB_COLUMNS)
_PREDICTION_COLUMNS = quoted(PREDICTION_COLUMNS)


def _sql(text: str) -> str:
    """SQLite-style SQL as psycopg takes it: ``?`` -> ``%s`` (no literal ``%`` or ``?`` in ours)."""
    return text.replace("?", "%s")


class PostgresStore(StoreLookups, Store):
    """One connection (guarded by a lock) for the daemon's writes and short reads; streaming
    reads open their own connection with a server-side cursor (rows arrive in batches).

    ``lazy`` (the daemon): a server that cannot be reached does not stop the caller; each call
    raises :class:`StoreError` and the connection is retried at most every ``retry_s``.
    """

    def __init__(self, dsn: str, *, lazy: bool = False, retry_s: float = 1.0, connect_timeout_s: int = 5):
        try:
            import psycopg
        except ImportError as error:   # an optional dependency: only this backend needs it
            raise StoreError("the PostgreSQL store needs psycopg: pip install 'psycopg[binary]'") from error
        self._psycopg = psycopg
        self.dsn = dsn
        try:   # what status and logs show: the connection string without its password
            shown = psycopg.conninfo.conninfo_to_dict(dsn)
        except psycopg.ProgrammingError as error:
            raise StoreError(f"[store] dsn is not a libpq connection string: {error}") from error
        self.path = "postgresql " + " ".join(f"{k}={v}" for k, v in shown.items() if k != "password")
        self._connect_timeout_s = connect_timeout_s
        self._lazy, self._retry_s = lazy, retry_s
        self._lock = threading.Lock()
        self._db = None
        self._error: StoreError | None = None
        self._next_try = 0.0
        try:
            with self._lock:
                self._connect()
        except StoreError as error:
            if not lazy:
                raise
            self._error, self._next_try = error, time.monotonic() + retry_s
            logger.error("store unavailable; answering without it until it opens: %s", error)

    # -- plumbing
    def _open(self):
        try:
            return self._psycopg.connect(self.dsn, autocommit=True, connect_timeout=self._connect_timeout_s)
        except self._psycopg.Error as error:
            raise StoreError(f"cannot connect to the PostgreSQL store: {error}".strip()) from error

    def _connect(self) -> None:
        db = self._open()
        try:
            self._migrate(db)
        except self._psycopg.Error as error:
            db.close()
            raise StoreError(f"cannot migrate the PostgreSQL store: {error}") from error
        self._db, self._error = db, None

    def _migrate(self, db) -> None:
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            db.execute("CREATE TABLE IF NOT EXISTS hpcpredict_schema (level INTEGER NOT NULL)")
            row = db.execute("SELECT level FROM hpcpredict_schema").fetchone()
            level = row[0] if row else 0
            if row is None:
                db.execute("INSERT INTO hpcpredict_schema VALUES (0)")
            for number, script in enumerate(MIGRATIONS[level:], start=level + 1):
                for statement in script.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute("UPDATE hpcpredict_schema SET level = %s", (number,))
                logger.info("PostgreSQL store migrated to schema %d", number)

    def _connection(self):
        if self._db is not None and not self._db.closed:
            return self._db
        now = time.monotonic()
        if now < self._next_try:
            raise StoreError(f"store unavailable: {self._error}")
        try:
            self._connect()
        except StoreError as error:
            self._error, self._next_try = error, now + self._retry_s
            raise
        return self._db

    def _failed(self, error) -> None:
        """A lost connection is dropped and reopened on the next call."""
        if self._db is not None and (self._db.closed or self._db.broken or
                                     isinstance(error, self._psycopg.OperationalError)):
            try:
                self._db.close()
            except self._psycopg.Error:
                pass
            self._db, self._error, self._next_try = None, StoreError(str(error)), 0.0

    @contextmanager
    def _using(self):
        """The connection, under the lock; psycopg errors become StoreError."""
        with self._lock:
            db = self._connection()
            try:
                yield db
            except self._psycopg.Error as error:
                self._failed(error)
                raise StoreError(f"store operation failed (PostgreSQL): {error}") from error

    def _read(self, sql: str, params=()) -> list:
        with self._using() as db:
            return db.execute(_sql(sql), params).fetchall()

    def _stream(self, sql: str, params=()) -> Iterator[tuple]:
        """Rows of ``sql`` from a server-side cursor on a connection of its own (one snapshot)."""
        db = self._open()
        try:
            with db.transaction(), db.cursor(name="hpcpredict_stream") as cursor:
                cursor.itersize = STREAM_BATCH_ROWS
                cursor.execute(_sql(sql), params)
                yield from cursor
        except self._psycopg.Error as error:
            raise StoreError(f"store read failed (PostgreSQL): {error}") from error
        finally:
            db.close()

    # -- jobs
    def add_jobs(self, records: Iterable[JobRecord], source: str) -> tuple[int, int]:
        sql = (f"INSERT INTO jobs (source, {_COLUMNS}, stored_at) VALUES (%s, {', '.join(['%s'] * len(JOB_COLUMNS))}, %s) "
               "ON CONFLICT (cluster, source, job_id) DO NOTHING")
        now = time.time()
        added = seen = 0
        batch: list = []

        def write(rows) -> int:
            with self._using() as db, db.transaction(), db.cursor() as cursor:
                cursor.executemany(sql, rows)
                return cursor.rowcount

        for record in records:
            batch.append((source, *job_values(record), now))
            if len(batch) >= 5000:
                added += write(batch)
                seen += len(batch)
                batch = []
        if batch:
            added += write(batch)
            seen += len(batch)
        return added, seen - added

    def record_outcome(self, record: JobRecord, *, prediction_id: str = "", node_list: str = "") -> bool:
        sql = (f"INSERT INTO jobs (source, {_COLUMNS}, prediction_id, node_list, stored_at) "
               f"VALUES ('outcome', {', '.join(['%s'] * len(JOB_COLUMNS))}, %s, %s, %s) "
               "ON CONFLICT (cluster, source, job_id) DO NOTHING")
        with self._using() as db:
            return db.execute(sql, (*job_values(record), prediction_id, node_list, time.time())).rowcount == 1

    def iter_jobs(self, *, since_end: float | None = None) -> Iterator[JobRecord]:
        where, params = ("WHERE end_time >= %s", (since_end,)) if since_end is not None else ("", ())
        return (job_from_row(row) for row in self._stream(f"SELECT {_COLUMNS} FROM jobs {where} ORDER BY end_time, id",
                                                            params))

    def count_jobs(self, *, scorable: bool = False, cluster: str | None = None) -> int:
        where = ["runtime_s >= 0 AND submit_time >= 0"] if scorable else []
        if cluster is not None:
            where.append("cluster = %s")
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        return int(self._read(f"SELECT COUNT(*) FROM jobs{clause}", () if cluster is None else (cluster,))[0][0])

    def jobs_by_submit(self, *, with_inputs: bool = True, cluster: str | None = None) -> Iterator[JobRecord]:
        columns = _COLUMNS.rsplit(", ", 1)[0] + (", inputs" if with_inputs else ", ''")
        on_cluster, params = ("", ()) if cluster is None else (" AND cluster = %s", (cluster,))
        rows = self._stream(f"SELECT {columns} FROM jobs WHERE runtime_s >= 0 AND submit_time >= 0{on_cluster} "
                            "ORDER BY submit_time, end_time, id", params)
        return (job_from_row(row) for row in rows)

    def recent_jobs(self, window: int, *, since_end: float | None = None) -> Iterator[JobRecord]:
        # Each (user, application)'s and each user's last jobs through their index (LATERAL),
        # the jobs after since_end, sorted by the server. The keys are walked by index seeks
        # (a recursive "skip scan", one seek per key), not by reading the whole index.
        newer = "UNION SELECT id FROM jobs WHERE end_time > %s OR end_time < 0" if since_end is not None else ""
        pairs = ('WITH RECURSIVE pair("user", application) AS ('
                 ' (SELECT "user", application FROM jobs ORDER BY "user", application LIMIT 1)'
                 ' UNION ALL SELECT next."user", next.application FROM pair CROSS JOIN LATERAL'
                 '  (SELECT "user", application FROM jobs WHERE ("user", application) > (pair."user", pair.application)'
                 '   ORDER BY "user", application LIMIT 1) next) ')
        sql = (f"{pairs}SELECT {_COLUMNS} FROM jobs WHERE id IN ("
               ' SELECT last.id FROM pair CROSS JOIN LATERAL'
               '  (SELECT id FROM jobs j WHERE j."user" = pair."user" AND j.application = pair.application'
               "   AND j.runtime_s > 0 ORDER BY j.end_time DESC, j.id DESC LIMIT %s) last"
               ' UNION SELECT last.id FROM (SELECT DISTINCT "user" FROM pair) person CROSS JOIN LATERAL'
               '  (SELECT id FROM jobs j WHERE j."user" = person."user" AND j.runtime_s > 0'
               "   ORDER BY j.end_time DESC, j.id DESC LIMIT %s) last "
               f"{newer}) ORDER BY end_time, id")
        params = (int(window), int(window)) + ((since_end,) if since_end is not None else ())
        return (job_from_row(row) for row in self._stream(sql, params))

    # -- predictions
    def record_prediction(self, row: PredictionRow) -> None:
        sql = (f"INSERT INTO predictions ({_PREDICTION_COLUMNS}) VALUES ({', '.join(['%s'] * len(PREDICTION_COLUMNS))}) "
               "ON CONFLICT (prediction_id) DO NOTHING")
        with self._using() as db, db.transaction():
            db.execute("SET LOCAL synchronous_commit = off")   # see the module doc
            db.execute(sql, prediction_values(row))

    def prediction(self, prediction_id: str) -> PredictionRow | None:
        rows = self._read(f"SELECT {_PREDICTION_COLUMNS} FROM predictions WHERE prediction_id = ?", (prediction_id,))
        return prediction_from_values(rows[0]) if rows else None

    def prediction_for_job(self, job_id: str, *, since: float = 0.0, cluster: str | None = None,
                           user: str | None = None) -> PredictionRow | None:
        if not job_id:
            return None
        where, params = prediction_for_job_where(job_id, since, cluster, user)
        rows = self._read(f"SELECT {_PREDICTION_COLUMNS} FROM predictions WHERE {where} "
                          "ORDER BY created DESC LIMIT 1", params)
        return prediction_from_values(rows[0]) if rows else None

    def prune_predictions(self, *, keep_days: float, keep_rows: int, now: float | None = None) -> int:
        deleted = 0
        with self._using() as db:
            if keep_days > 0:
                cutoff = (time.time() if now is None else now) - keep_days * 86400
                deleted += db.execute("DELETE FROM predictions WHERE created < %s", (cutoff,)).rowcount
            if keep_rows > 0:
                deleted += db.execute(
                    "DELETE FROM predictions WHERE prediction_id IN "
                    "(SELECT prediction_id FROM predictions ORDER BY created DESC OFFSET %s)", (keep_rows,)).rowcount
        if deleted:
            logger.info("store %s: %d prediction rows past retention deleted", self.path, deleted)
        return deleted

    def close(self) -> None:
        self.stop_retention()
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
