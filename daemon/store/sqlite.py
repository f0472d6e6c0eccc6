"""Where jobs, predictions and outcomes live: one small interface, SQLite (WAL) by default.

Every write is one transaction. SQLite runs in WAL mode with ``synchronous=FULL`` by default:
a reply that acknowledges an outcome is sent only after the transaction is on disk, so a
``kill -9`` of the daemon (or a power cut) never loses an acknowledged record. Prediction
records, written on every Predict, commit without the fsync (``synchronous=NORMAL`` for that
transaction): the WAL write reaches the kernel before the reply, so they too survive
``kill -9``; only an OS crash or power cut can drop the last few (the next FULL commit syncs
them). That saves one fsync (~3 ms on this machine) per prediction. In the daemon they do not
even wait for SQLite: they are copied into a memory-mapped journal (:mod:`.journal`, as safe
against ``kill -9``) and committed in batches by a background thread. Schema changes
are numbered migrations applied at open (``PRAGMA user_version`` holds the level reached).
A site that wants PostgreSQL implements :class:`Store` for it; nothing else changes.
"""
from __future__ import annotations

import logging
import os
import sqlite3
import stat
import threading
import time
from abc import ABC, abstractmethod
from contextlib import contextmanager
from typing import Iterable, Iterator, Protocol

from ..errors import StoreError
from .journal import JournalFile, decode_row, encode_row
from ..records import JobRecord
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
)

logger = logging.getLogger(__name__)

MIGRATIONS: tuple[str, ...] = (
    # 1: ended jobs (ingested history and outcomes the daemon was told about) + predictions
    """
    CREATE TABLE jobs (
        id INTEGER PRIMARY KEY,
        source TEXT NOT NULL,              -- 'outcome' or the ingested trace, e.g. 'swf:KTH-SP2.swf'
        job_id TEXT NOT NULL,
        user TEXT NOT NULL,
        grp TEXT NOT NULL DEFAULT '',
        account TEXT NOT NULL DEFAULT '',
        partition TEXT NOT NULL DEFAULT '',
        qos TEXT NOT NULL DEFAULT '',
        application TEXT NOT NULL DEFAULT '',
        job_name TEXT NOT NULL DEFAULT '',
        nodes INTEGER NOT NULL DEFAULT 0,
        requested_procs INTEGER NOT NULL DEFAULT 0,
        allocated_procs INTEGER NOT NULL DEFAULT 0,
        requested_time_s REAL NOT NULL DEFAULT 0,
        submit_time REAL NOT NULL,
        start_time REAL NOT NULL DEFAULT -1,
        end_time REAL NOT NULL DEFAULT -1,
        runtime_s REAL NOT NULL,
        state TEXT NOT NULL,
        exit_code INTEGER NOT NULL DEFAULT 0,
        inputs TEXT NOT NULL DEFAULT '{}',
        prediction_id TEXT NOT NULL DEFAULT '',
        node_list TEXT NOT NULL DEFAULT '',
        stored_at REAL NOT NULL,
        UNIQUE (source, job_id)
    );
    CREATE INDEX jobs_end ON jobs (end_time);
    CREATE INDEX jobs_user_app ON jobs (user, application);
    CREATE TABLE predictions (
        prediction_id TEXT PRIMARY KEY,
        job_id TEXT NOT NULL DEFAULT '',
        stage TEXT NOT NULL,               -- 'submit' | 'allocation' | 'runtime-features'
        user TEXT NOT NULL DEFAULT '',
        application TEXT NOT NULL DEFAULT '',
        created REAL NOT NULL,
        runtime_s REAL NOT NULL,
        low_s REAL NOT NULL,
        high_s REAL NOT NULL,
        bound_s REAL NOT NULL,
        requested_time_s REAL NOT NULL DEFAULT 0,
        comm_time_s REAL,
        model_name TEXT NOT NULL,
        model_version TEXT NOT NULL,
        fallback INTEGER NOT NULL,
        request BLOB
    );
    CREATE INDEX predictions_job ON predictions (job_id);
    """,
    # 2: indexes for reads that stream: training in submission order, the start-up replay of
    # each user's (and user x application's) recent jobs, and per-user reports
    """
    CREATE INDEX jobs_submit ON jobs (submit_time, end_time);
    CREATE INDEX jobs_user_end ON jobs (user, end_time);
    CREATE INDEX jobs_user_app_end ON jobs (user, application, end_time);
    DROP INDEX jobs_user_app;
    """,
    # 3: clusters: jobs and outcomes are unique per (cluster, source, job id) and predictions
    # name their cluster; rows stored before get cluster '' (the site's only cluster). SQLite
    # cannot change a UNIQUE constraint in place: the jobs table is rebuilt (ids kept).
    """
    CREATE TABLE jobs_with_cluster (
        id INTEGER PRIMARY KEY,
        cluster TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL,
        job_id TEXT NOT NULL,
        user TEXT NOT NULL,
        grp TEXT NOT NULL DEFAULT '',
        account TEXT NOT NULL DEFAULT '',
        partition TEXT NOT NULL DEFAULT '',
        qos TEXT NOT NULL DEFAULT '',
        application TEXT NOT NULL DEFAULT '',
        job_name TEXT NOT NULL DEFAULT '',
        nodes INTEGER NOT NULL DEFAULT 0,
        requested_procs INTEGER NOT NULL DEFAULT 0,
        allocated_procs INTEGER NOT NULL DEFAULT 0,
        requested_time_s REAL NOT NULL DEFAULT 0,
        submit_time REAL NOT NULL,
        start_time REAL NOT NULL DEFAULT -1,
        end_time REAL NOT NULL DEFAULT -1,
        runtime_s REAL NOT NULL,
        state TEXT NOT NULL,
        exit_code INTEGER NOT NULL DEFAULT 0,
        inputs TEXT NOT NULL DEFAULT '{}',
        prediction_id TEXT NOT NULL DEFAULT '',
        node_list TEXT NOT NULL DEFAULT '',
        stored_at REAL NOT NULL,
        UNIQUE (cluster, source, job_id)
    );
    INSERT INTO jobs_with_cluster (id, cluster, source, job_id, user, grp, account, partition, qos, application,
        job_name, nodes, requested_procs, allocated_procs, requested_time_s, submit_time, start_time, end_time,
        runtime_s, state, exit_code, inputs, prediction_id, node_list, stored_at)
    SELECT id, '', source, job_id, user, grp, account, partition, qos, application, job_name, nodes,
        requested_procs, allocated_procs, requested_time_s, submit_time, start_time, end_time, runtime_s, state,
        exit_code, inputs, prediction_id, node_list, stored_at FROM jobs;
    DROP TABLE jobs;
    ALTER TABLE jobs_with_cluster RENAME TO jobs;
    CREATE INDEX jobs_end ON jobs (end_time);
    CREATE INDEX jobs_submit ON jobs (submit_time, end_time);
    CREATE INDEX jobs_user_end ON jobs (user, end_time);
    CREATE INDEX jobs_user_app_end ON jobs (user, application, end_time);
    CREATE INDEX jobs_cluster_job ON jobs (cluster, job_id);
    ALTER TABLE predictions ADD COLUMN cluster TEXT NOT NULL DEFAULT '';
    DROP INDEX predictions_job;
    CREATE INDEX predictions_job ON predictions (job_id, cluster);
    """,
    # 4: the limits the daemon decided for the submission hook (daemon/policy), so that
    # `hpcpredict explain` reads what was decided instead of recomputing it (named applied_* until level 5)
    """
    ALTER TABLE predictions ADD COLUMN applied_time_limit_s INTEGER;
    ALTER TABLE predictions ADD COLUMN applied_time_min_s INTEGER;
    ALTER TABLE predictions ADD COLUMN policy_mode TEXT NOT NULL DEFAULT '';
    ALTER TABLE predictions ADD COLUMN policy_reason TEXT NOT NULL DEFAULT '';
    """,
    # 5: decided apart from what happened. Level 4's applied_* columns always held what the daemon
    # decided: renamed so; beside them what PrologSlurmctld read back from slurmctld at allocation
    # (the TimeLimit the job started under, its TimeMin)
    """
    ALTER TABLE predictions RENAME COLUMN applied_time_limit_s TO decided_time_limit_s;
    ALTER TABLE predictions RENAME COLUMN applied_time_min_s TO decided_time_min_s;
    ALTER TABLE predictions ADD COLUMN started_time_limit_s INTEGER;
    ALTER TABLE predictions ADD COLUMN started_time_min_s INTEGER;
    """,
    # 6: the --time suggested in the answer (the sbatch line's and the job output's), so that
    # `explain` and `report` show what the job was told instead of recomputing it (#40)
    """
    ALTER TABLE predictions ADD COLUMN suggested_time_limit_s INTEGER;
    """,
)

#: Rows fetched per step by streaming reads (memory stays bounded whatever the history).
STREAM_BATCH_ROWS = 5000
# Distinct keys by index seeks ("skip scan"): one seek per key instead of reading every index
# entry, so a daemon's start-up costs as many seeks as there are users, not history rows.
_DISTINCT_USERS = (
    "WITH RECURSIVE walk(user) AS (SELECT MIN(user) FROM jobs UNION ALL "
    "SELECT (SELECT MIN(user) FROM jobs WHERE user > walk.user) FROM walk WHERE walk.user IS NOT NULL) "
    "SELECT user FROM walk WHERE user IS NOT NULL")
_DISTINCT_APPLICATIONS = (
    "WITH RECURSIVE walk(application) AS (SELECT MIN(application) FROM jobs WHERE user = ?1 UNION ALL "
    "SELECT (SELECT MIN(application) FROM jobs WHERE user = ?1 AND application > walk.application) FROM walk "
    "WHERE walk.application IS NOT NULL) SELECT application FROM walk WHERE application IS NOT NULL")


_INSERT_PREDICTION = (f"INSERT OR REPLACE INTO predictions ({', '.join(PREDICTION_COLUMNS)}) "
                      f"VALUES ({', '.join('?' * len(PREDICTION_COLUMNS))})")
_PREDICTION_SELECT = f"SELECT {', '.join(PREDICTION_COLUMNS)} FROM predictions"


def private_file(path: str, *, create: bool = True) -> None:
    """Make ``path`` readable by its owner only (0600), whatever the umask: the store holds every
    user's job requests. Created empty when missing (SQLite then keeps the mode, and gives it
    to its ``-wal`` and ``-shm`` files); an existing file loses its group and other bits,
    which an older version or a wide umask may have left. A file of another owner (a store
    opened read-only by an admin's CLI) is left alone.

    The file is looked at through an ``O_PATH`` descriptor: closing any other descriptor of a
    file drops every POSIX lock this process holds on it (fcntl(2)), and SQLite's locks on the
    store and on ``-shm`` may already be held here. Without its read lock on ``-shm``, the next
    process to open the store resets that file under this one's mapping, which dies of SIGBUS."""
    if create:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
        except FileExistsError:
            pass
        except OSError as error:   # read-only file system, no permission: the open proper reports it
            logger.debug("cannot create %s: %s", path, error)
            return
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as error:   # missing (not created), or not reachable: the open proper reports it
        logger.debug("cannot check the mode of %s: %s", path, error)
        return
    try:
        info = os.fstat(fd)
        if info.st_mode & 0o077 and info.st_uid == os.geteuid() and stat.S_ISREG(info.st_mode):
            os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(info.st_mode) & 0o700)   # the file this descriptor names
    except OSError as error:
        logger.debug("cannot restrict the mode of %s: %s", path, error)
    finally:
        os.close(fd)


@contextmanager
def _immediate(db: sqlite3.Connection):
    """BEGIN IMMEDIATE ... COMMIT; rolled back if anything in between fails."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


class StoreEvents(Protocol):
    """What a store tells its owner about the work it does in the background: the store's side
    of the seam, so the store knows no more of the daemon's service than this (the service
    implements it: its fault board, and a history replay once writes work again)."""

    def journal_opened(self, error: str | None) -> None:
        """The prediction journal could not be opened (why), or is open again (None)."""

    def journal_committed(self, error: str | None) -> None:
        """Journaled predictions could not be committed in the background (why; they are kept),
        or are committed again (None)."""


class Store(ABC):
    """What the daemon and the CLI need from storage."""

    #: Told of the journal's faults and recoveries (the daemon's service); None: nobody listens.
    events: StoreEvents | None = None
    #: Why the daemon's prediction journal could not be opened (predictions then go straight
    #: to the store); None when it is open or not asked for.
    journal_error: str | None = None

    def files(self) -> tuple[str, ...]:
        """The files this store keeps on the daemon's disk (its size cap counts them); () for a
        store on a server."""
        return ()

    def pending_predictions(self) -> int:
        """Predictions answered but not yet committed (a store that queues writes says how many)."""
        return 0

    @abstractmethod
    def add_jobs(self, records: Iterable[JobRecord], source: str) -> tuple[int, int]:
        """Store ended jobs; returns (added, already present). Idempotent per (source, job_id)."""

    @abstractmethod
    def record_outcome(self, record: JobRecord, *, prediction_id: str = "", node_list: str = "") -> bool:
        """Store one outcome durably; False when the same job's outcome was already stored."""

    @abstractmethod
    def record_prediction(self, row: PredictionRow) -> None: ...

    @abstractmethod
    def prediction(self, prediction_id: str) -> PredictionRow | None: ...

    def prediction_for_job(self, job_id: str, *, since: float = 0.0, cluster: str | None = None,
                           user: str | None = None) -> PredictionRow | None:
        """The latest prediction recorded for ``job_id`` (at allocation) created at or after
        ``since``, on ``cluster`` (None: any), of ``user`` (None: any; a job's outcome asks with
        its user, so another user's prediction under that job id never links it); None when there
        is none (or the store cannot look it up)."""
        return None

    def prune_predictions(self, *, keep_days: float, keep_rows: int, now: float | None = None) -> int:
        """Delete prediction rows older than ``keep_days`` (0: no age limit) and the oldest beyond
        ``keep_rows`` (0: no count limit); returns how many went. Outcomes (``jobs``) are kept."""
        return 0

    def start_retention(self, keep_days: float, keep_rows: int, every_s: float = 3600.0) -> None:
        """The daemon's store applies the retention at start and then every ``every_s`` (a
        thread, stopped by :meth:`stop_retention`)."""
        if keep_days <= 0 and keep_rows <= 0:
            return
        stop = self._retention_stop = threading.Event()

        def retain() -> None:
            while not stop.is_set():
                try:
                    self.prune_predictions(keep_days=keep_days, keep_rows=keep_rows)
                except StoreError as error:   # the store's own fault reporting covers it; try again later
                    logger.warning("prediction retention not applied: %s", error)
                except Exception:
                    logger.exception("prediction retention failed")
                stop.wait(every_s)

        threading.Thread(target=retain, name="prediction-retention", daemon=True).start()

    def stop_retention(self) -> None:
        stop = getattr(self, "_retention_stop", None)
        if stop is not None:
            stop.set()

    @abstractmethod
    def iter_jobs(self, *, since_end: float | None = None) -> Iterator[JobRecord]:
        """Every ended job in end-time order (history replays depend on that order)."""

    def count_jobs(self, *, scorable: bool = False, cluster: str | None = None) -> int:
        """Stored jobs (of ``cluster``; None: all); ``scorable``: only those with a known
        submit time and runtime."""
        return sum(1 for job in self.iter_jobs() if (not scorable or (job.runtime_s >= 0 and job.submit_time >= 0))
                   and (cluster is None or job.cluster == cluster))

    def jobs_by_submit(self, *, with_inputs: bool = True, cluster: str | None = None) -> Iterator[JobRecord]:
        """Jobs (of ``cluster``; None: all) with a known submit time and runtime in submission
        order, ties in end-time order (what training replays). A backend streams them; this
        default does not."""
        usable = [job for job in self.iter_jobs() if job.runtime_s >= 0 and job.submit_time >= 0
                  and (cluster is None or job.cluster == cluster)]
        return iter(sorted(usable, key=lambda job: job.submit_time))

    def recent_jobs(self, window: int, *, since_end: float | None = None) -> Iterator[JobRecord]:
        """In end-time order: the last ``window`` jobs (runtime > 0) of every user and of every
        (user, application), plus every job that ended after ``since_end`` (None: none).
        That is all a daemon start replays into its history models; this default replays all."""
        return self.iter_jobs()

    @abstractmethod
    def counts(self) -> dict[str, int]: ...

    @abstractmethod
    def recent_accuracy(self, last: int = 100) -> dict[str, float]: ...

    @abstractmethod
    def close(self) -> None: ...


class SQLiteStore(StoreLookups, Store):
    """The embedded default. One connection guarded by a lock: writes serialise anyway.

    ``lazy`` (the daemon): a store that cannot be opened (read-only or full file system, bad
    permissions) does not stop the caller; every call raises :class:`StoreError` and the open is
    retried at most every ``retry_s`` until it works. A read-only/I/O error later drops the
    connection the same way, so the store recovers by itself when the fault clears.
    """

    def __init__(self, path: str, *, synchronous: str = "FULL", busy_timeout_ms: int = 5000,
                 prediction_busy_timeout_ms: int = 50, lazy: bool = False, retry_s: float = 1.0,
                 journal_bytes: int = 0, flush_delay_s: float = 0.05):
        self.path = path
        self._synchronous = synchronous.upper()
        self._busy_timeout_ms = int(busy_timeout_ms)
        # Prediction records are written on Predict's path: without an fsync (WAL + NORMAL: the
        # commit is in the OS page cache before the reply, so it survives kill -9 of the daemon;
        # a power cut may lose the last ones, which costs only accuracy bookkeeping) and with a
        # short busy timeout, so a stalled store never stalls an answer.
        self._fast = ("NORMAL" if self._synchronous in ("FULL", "EXTRA") else self._synchronous,
                      int(prediction_busy_timeout_ms))
        self._mode = (self._synchronous, self._busy_timeout_ms)
        self._lazy, self._retry_s = lazy, retry_s
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._error: StoreError | None = None
        self._next_try = 0.0
        # Prediction journal (the daemon only: ``journal_bytes`` > 0). Two files alternate;
        # ``_pending[i]`` holds the rows of file i not yet committed, ``_pending_ids`` finds them.
        self._journal_bytes, self._flush_delay_s = int(journal_bytes), flush_delay_s
        self._journals: list[JournalFile] | None = None
        self._journal_lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._pending: tuple[list, list] = ([], [])
        self._pending_ids: dict[str, tuple] = {}
        self._active = 0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None
        self._flush_failed = False
        try:
            self._connect()
        except StoreError as error:
            if not lazy:
                raise
            self._error, self._next_try = error, time.monotonic() + retry_s
            logger.error("store unavailable; answering without it until it opens: %s", error)

    def files(self) -> tuple[str, ...]:
        if self.path == ":memory:":
            return ()
        return (self.path, self.path + "-wal", self.path + "-shm",
                *(f"{self.path}.journal-{index}" for index in range(2)))

    # -- plumbing
    def _connect(self) -> sqlite3.Connection:
        """Open, set the pragmas, migrate; the new connection. Caller holds the lock (or is __init__)."""
        try:
            if self.path != ":memory:":
                os.makedirs(os.path.dirname(os.path.abspath(self.path)), mode=0o750, exist_ok=True)
                private_file(self.path)
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None,
                                 timeout=self._busy_timeout_ms / 1000)
        except (sqlite3.Error, OSError) as error:
            raise StoreError(f"cannot open store {self.path}: {error}") from error
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={self._synchronous}")
            db.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
            self._migrate(db)
        except sqlite3.Error as error:
            db.close()
            raise StoreError(f"cannot open store {self.path}: {error}") from error
        for suffix in ("-wal", "-shm"):   # SQLite gives them the store's mode; older ones may be wider
            private_file(self.path + suffix, create=False)
        self._db, self._mode, self._error = db, (self._synchronous, self._busy_timeout_ms), None
        if self._journal_bytes > 0 and self._journals is None and self.path != ":memory:":
            self._open_journals(db)
        return db

    # -- prediction journal
    def _open_journals(self, db: sqlite3.Connection) -> None:
        """Open both files, commit what a killed daemon left in them (through ``db``, the store's
        open connection), start the flusher.
        Caller holds the store lock (or is __init__). Without a journal, rows go straight in."""
        journals: list[JournalFile] = []
        try:
            for index in range(2):
                journals.append(JournalFile.open(f"{self.path}.journal-{index}", self._journal_bytes))
            left = [decode_row(payload) for journal in journals for payload in journal.records()]
            if left:
                with _immediate(db):
                    db.executemany(_INSERT_PREDICTION, left)
                logger.warning("store %s: %d prediction records recovered from the journal", self.path, len(left))
            for journal in journals:
                journal.reset()
        except (StoreError, ValueError, sqlite3.Error) as error:
            for journal in journals:
                journal.close()   # what they hold stays in the files for the next try
            if self.journal_error is None:
                logger.error("prediction journal unavailable, writing predictions directly: %s", error)
            self.journal_error = str(error)
            if self.events is not None:
                self.events.journal_opened(self.journal_error)
        else:
            reopened = self.journal_error is not None
            self._journals, self.journal_error = journals, None
            if reopened:
                logger.warning("store %s: prediction journal open again", self.path)
                if self.events is not None:
                    self.events.journal_opened(None)
        # The flusher also retries a journal that could not be opened (a full disk at start,
        # records a killed daemon left): they reach the store once it has room, without a restart.
        if self._flusher is None:
            self._flusher = threading.Thread(target=self._flush_loop, name="journal-flush", daemon=True)
            self._flusher.start()

    def _journal_append(self, params: tuple) -> bool:
        payload = encode_row(params)
        with self._journal_lock:
            if self._journals is None or not self._journals[self._active].append(payload):
                return False
            pending = self._pending[self._active]
            pending.append(params)
            self._pending_ids[params[0]] = params
            if len(pending) == 1:
                self._wake.set()
        return True

    def pending_predictions(self) -> int:
        """Journaled predictions not yet committed (0 without a journal)."""
        return len(self._pending[0]) + len(self._pending[1])

    def flush(self) -> bool:
        """Commit every journaled prediction now; False when the store refused (rows kept)."""
        with self._flush_lock:
            for _ in range(2):   # a batch left by a failed flush, then the active file
                with self._journal_lock:
                    inactive = 1 - self._active
                    if self._pending[inactive]:
                        index = inactive
                    elif self._pending[self._active]:
                        index, self._active = self._active, inactive   # writers go on in the other file
                    else:
                        return True
                    rows = list(self._pending[index])   # nobody appends to a non-active file
                try:
                    self._write_many(_INSERT_PREDICTION, rows)
                except StoreError as error:
                    if not self._flush_failed:
                        logger.error("journaled predictions not committed yet (kept): %s", error)
                    self._flush_failed = True
                    if self.events is not None:
                        self.events.journal_committed(str(error))
                    return False
                with self._journal_lock:
                    del self._pending[index][:]
                    for row in rows:
                        self._pending_ids.pop(row[0], None)
                    # Rows are journaled only while the journals are open; close() flushes before closing them.
                    assert self._journals is not None
                    self._journals[index].reset()
                if self._flush_failed:
                    self._flush_failed = False
                    if self.events is not None:
                        self.events.journal_committed(None)
            return True

    def _reopen_journals(self) -> None:
        with self._lock:
            if self._journals is not None or self._stop.is_set():
                return
            try:
                db = self._connection()
            except StoreError:
                return   # _connection opens the journals itself once the store opens
            if self._journals is None:
                self._open_journals(db)

    def _flush_loop(self) -> None:
        stop = self._stop
        while not stop.is_set():
            self._wake.wait(timeout=1.0)
            if self._journals is None:
                self._reopen_journals()
                if self._journals is None:
                    stop.wait(self._retry_s)
                    continue
            if stop.wait(self._flush_delay_s):   # let a batch gather: one transaction for many rows
                break
            self._wake.clear()
            try:
                committed = self.flush()
            except Exception:   # never let the flusher die: the rows stay in the journal
                logger.exception("prediction journal flush failed")
                committed = False
            if not committed:
                stop.wait(self._retry_s)
            if self._pending[0] or self._pending[1]:
                self._wake.set()

    def _migrate(self, db: sqlite3.Connection) -> None:
        level = db.execute("PRAGMA user_version").fetchone()[0]
        for number, script in enumerate(MIGRATIONS[level:], start=level + 1):
            with _immediate(db):
                for statement in script.split(";"):
                    if statement.strip():
                        db.execute(statement)
                db.execute(f"PRAGMA user_version={number}")
            logger.info("store %s migrated to schema %d", self.path, number)

    def _connection(self) -> sqlite3.Connection:
        """The open connection; reopens (at most every ``retry_s``) after a fault closed it."""
        if self._db is not None:
            return self._db
        now = time.monotonic()
        if now < self._next_try:
            raise StoreError(f"store {self.path} unavailable: {self._error}")
        try:
            db = self._connect()
        except StoreError as error:
            self._error, self._next_try = error, now + self._retry_s
            raise
        logger.warning("store %s reopened", self.path)
        return db

    def _failed(self, db: sqlite3.Connection, error: sqlite3.Error) -> None:
        """A read-only file system or an I/O error poisons the connection ``db`` (the store's, used
        under the lock): drop it, reopen later."""
        text = str(error).lower()
        if "readonly" in text or "read-only" in text or "i/o" in text or "unable to open" in text:
            try:
                db.close()
            except sqlite3.Error:
                pass
            self._db, self._error, self._next_try = None, StoreError(str(error)), 0.0

    def _set_mode(self, db: sqlite3.Connection, mode: tuple[str, int]) -> None:
        """Durability/wait settings for the next transaction (changed only when they differ)."""
        if mode != self._mode:
            db.execute(f"PRAGMA synchronous={mode[0]}")
            db.execute(f"PRAGMA busy_timeout={mode[1]}")
            self._mode = mode

    @contextmanager
    def _using(self, mode: tuple[str, int]):
        """The connection, under the lock, in ``mode``; SQLite errors become StoreError."""
        with self._lock:
            db = self._connection()
            try:
                self._set_mode(db, mode)
                yield db
            except sqlite3.Error as error:
                self._failed(db, error)
                raise StoreError(f"store write failed ({self.path}): {error}") from error

    def _mode_for(self, durable: bool) -> tuple[str, int]:
        """``durable``: fsync before returning (configured ``synchronous``); else the fast mode."""
        return (self._synchronous, self._busy_timeout_ms) if durable else self._fast

    def _write(self, statements, *, durable: bool = True) -> list:
        """Run (sql, params) pairs in one IMMEDIATE transaction; returns each rowcount."""
        with self._using(self._mode_for(durable)) as db, _immediate(db):
            return [db.execute(sql, params).rowcount for sql, params in statements]

    def _write_one(self, sql: str, params, *, durable: bool = True) -> int:
        """One statement as its own (implicit) transaction: as atomic as :meth:`_write`, with
        one ``execute`` instead of three."""
        with self._using(self._mode_for(durable)) as db:
            return db.execute(sql, params).rowcount

    def _write_many(self, sql: str, rows: list) -> None:
        """Many rows of one statement in one transaction, without the fsync (journal batches)."""
        with self._using(self._fast) as db, _immediate(db):
            db.executemany(sql, rows)

    def _read(self, sql: str, params=()) -> list:
        with self._lock:
            db = self._connection()
            try:
                return db.execute(sql, params).fetchall()
            except sqlite3.Error as error:
                self._failed(db, error)
                raise StoreError(f"store read failed ({self.path}): {error}") from error

    # -- jobs
    def add_jobs(self, records: Iterable[JobRecord], source: str) -> tuple[int, int]:
        sql = (f"INSERT OR IGNORE INTO jobs (source, {', '.join(JOB_COLUMNS)}, stored_at) "
               f"VALUES (?, {', '.join('?' * len(JOB_COLUMNS))}, ?)")
        now = time.time()
        added = seen = 0
        batch: list = []
        for record in records:
            batch.append((sql, (source, *job_values(record), now)))
            if len(batch) >= 5000:
                counts = self._write(batch)
                added += sum(counts)
                seen += len(counts)
                batch = []
        if batch:
            counts = self._write(batch)
            added += sum(counts)
            seen += len(counts)
        return added, seen - added

    def record_outcome(self, record: JobRecord, *, prediction_id: str = "", node_list: str = "") -> bool:
        sql = (f"INSERT OR IGNORE INTO jobs (source, {', '.join(JOB_COLUMNS)}, prediction_id, node_list, stored_at) "
               f"VALUES ('outcome', {', '.join('?' * len(JOB_COLUMNS))}, ?, ?, ?)")
        return self._write_one(sql, (*job_values(record), prediction_id, node_list, time.time())) == 1

    def iter_jobs(self, *, since_end: float | None = None) -> Iterator[JobRecord]:
        where, params = ("WHERE end_time >= ?", (since_end,)) if since_end is not None else ("", ())
        rows = self._stream(f"SELECT {', '.join(JOB_COLUMNS)} FROM jobs {where} ORDER BY end_time, id", params)
        return (job_from_row(row) for row in rows)

    def count_jobs(self, *, scorable: bool = False, cluster: str | None = None) -> int:
        where = ["runtime_s >= 0 AND submit_time >= 0"] if scorable else []
        if cluster is not None:
            where.append("cluster = ?")
        clause = f" WHERE {' AND '.join(where)}" if where else ""
        return int(self._read(f"SELECT COUNT(*) FROM jobs{clause}", () if cluster is None else (cluster,))[0][0])

    def jobs_by_submit(self, *, with_inputs: bool = True, cluster: str | None = None) -> Iterator[JobRecord]:
        columns = ", ".join(JOB_COLUMNS[:-1]) + (", inputs" if with_inputs else ", ''")
        on_cluster, params = ("", ()) if cluster is None else (" AND cluster = ?", (cluster,))
        rows = self._stream(f"SELECT {columns} FROM jobs WHERE runtime_s >= 0 AND submit_time >= 0{on_cluster} "
                            "ORDER BY submit_time, end_time, id", params)
        return (job_from_row(row) for row in rows)

    def recent_jobs(self, window: int, *, since_end: float | None = None) -> Iterator[JobRecord]:
        return (job_from_row(row) for row in self._stream_recent(int(window), since_end))

    def _stream_recent(self, window: int, since_end: float | None) -> Iterator[tuple]:
        """One snapshot: the ids of each user's and each (user, application)'s last ``window``
        jobs, each found through its index (a few rows per key, not a scan of the history:
        the users and their applications are walked by index seeks, one per key), and of the
        jobs newer than ``since_end``, collected in a temporary table (on disk, so memory stays
        bounded); then those rows in end-time order."""
        with self._snapshot() as db:
            db.execute("CREATE TEMP TABLE IF NOT EXISTS replay_ids (id INTEGER PRIMARY KEY)")
            db.execute("DELETE FROM replay_ids")
            for (user,) in db.execute(_DISTINCT_USERS).fetchall():
                db.execute("INSERT OR IGNORE INTO replay_ids SELECT id FROM jobs WHERE user = ? AND runtime_s > 0 "
                           "ORDER BY end_time DESC, id DESC LIMIT ?", (user, window))
                for (application,) in db.execute(_DISTINCT_APPLICATIONS, (user,)).fetchall():
                    db.execute("INSERT OR IGNORE INTO replay_ids SELECT id FROM jobs WHERE user = ? AND application = ? "
                               "AND runtime_s > 0 ORDER BY end_time DESC, id DESC LIMIT ?", (user, application, window))
            if since_end is not None:
                db.execute("INSERT OR IGNORE INTO replay_ids SELECT id FROM jobs WHERE end_time > ? OR end_time < 0",
                           (since_end,))
            cursor = db.execute(f"SELECT {', '.join('j.' + c for c in JOB_COLUMNS)} FROM replay_ids r "
                                "JOIN jobs j ON j.id = r.id ORDER BY j.end_time, j.id")
            while rows := cursor.fetchmany(STREAM_BATCH_ROWS):
                yield from rows

    @contextmanager
    def _snapshot(self):
        """A connection of its own, in one read transaction (a consistent snapshot; in WAL
        mode writers go on meanwhile), for reads that stream: rows are fetched in batches, so
        memory does not grow with the history. SQLite errors become StoreError."""
        if self.path == ":memory:":   # tests: one connection only, held for the whole read
            with self._lock:
                db = self._connection()
                try:
                    yield db
                except sqlite3.Error as error:
                    raise StoreError(f"store read failed ({self.path}): {error}") from error
            return
        try:
            db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None,
                                 timeout=self._busy_timeout_ms / 1000)
        except (sqlite3.Error, OSError) as error:
            raise StoreError(f"cannot open store {self.path}: {error}") from error
        try:
            db.execute("BEGIN")
            yield db
        except sqlite3.Error as error:
            raise StoreError(f"store read failed ({self.path}): {error}") from error
        finally:
            db.close()

    def _stream(self, sql: str, params=()) -> Iterator[tuple]:
        with self._snapshot() as db:
            cursor = db.execute(sql, params)
            while rows := cursor.fetchmany(STREAM_BATCH_ROWS):
                yield from rows

    # -- predictions
    def record_prediction(self, row: PredictionRow) -> None:
        params = prediction_values(row)
        if self._journals is not None and self._journal_append(params):
            return
        self._write_one(_INSERT_PREDICTION, params, durable=False)   # no journal, or it is full

    def prediction(self, prediction_id: str) -> PredictionRow | None:
        pending = self._pending_ids.get(prediction_id)
        if pending is not None:
            return prediction_from_values(pending)
        rows = self._read(f"{_PREDICTION_SELECT} WHERE prediction_id = ?", (prediction_id,))
        return prediction_from_values(rows[0]) if rows else None

    def prediction_for_job(self, job_id: str, *, since: float = 0.0, cluster: str | None = None,
                           user: str | None = None) -> PredictionRow | None:
        if not job_id:
            return None
        with self._journal_lock:
            pending = [values for values in self._pending_ids.values() if values[1] == job_id and values[5] >= since
                       and (cluster is None or values[16] == cluster) and (user is None or values[3] == user)]
        if pending:
            return prediction_from_values(max(pending, key=lambda values: values[5]))
        where, params = prediction_for_job_where(job_id, since, cluster, user)
        rows = self._read(f"{_PREDICTION_SELECT} WHERE {where} ORDER BY created DESC LIMIT 1", params)
        return prediction_from_values(rows[0]) if rows else None

    def prune_predictions(self, *, keep_days: float, keep_rows: int, now: float | None = None) -> int:
        self.flush()
        deleted = 0
        if keep_days > 0:
            cutoff = (time.time() if now is None else now) - keep_days * 86400
            deleted += self._write_one("DELETE FROM predictions WHERE created < ?", (cutoff,), durable=False)
        if keep_rows > 0:
            total = self._read("SELECT COUNT(*) FROM predictions")[0][0]
            if total > keep_rows:
                deleted += self._write_one(
                    "DELETE FROM predictions WHERE prediction_id IN "
                    "(SELECT prediction_id FROM predictions ORDER BY created LIMIT ?)", (total - keep_rows,),
                    durable=False)
        if deleted:
            logger.info("store %s: %d prediction rows past retention deleted", self.path, deleted)
        return deleted

    def close(self) -> None:
        self._stop.set()   # the flusher
        self.stop_retention()
        if self._flusher is not None:
            self._wake.set()
            self._flusher.join(timeout=5)
        if self._journals is not None:
            self.flush()   # what it cannot commit stays in the files for the next start
            with self._journal_lock:
                for journal in self._journals:
                    journal.close()
                self._journals = None
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
