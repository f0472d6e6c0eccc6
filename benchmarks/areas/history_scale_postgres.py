"""Training and daemon start-up on a long history in the PostgreSQL store: 10^6 / 10^7 stored jobs.

    python -m benchmarks run history_scale_postgres                  # 10^6 jobs
    python -m benchmarks run history_scale_postgres --jobs 100000    # a quick estimate first
    python -m benchmarks run history_scale_postgres --compare-sqlite # and the SQLite store, same load
    python -m benchmarks run history_scale_postgres --jobs 10000000 \
        --out benchmarks/results/history_scale_postgres_1e7.json    # 10^7: ~25 min to build on 2 cores

The same measurement as ``history_scale`` (same replayed KTH-SP2 + HPC2N history, same child
processes, same wall time and peak RSS), with ``[store] backend = "postgres"``: a throwaway
PostgreSQL server on a Unix socket (tests/store/postgres_server.py; package defaults),
the history added through PostgresStore.add_jobs, then in fresh processes ``hpcpredict train
--no-reload`` (streams the jobs by submit time through a server-side cursor) and ``hpcpredictd``
start-up until it serves (replays each user's recent jobs, selected by the server). The peak
RSS is the client process's; the server's own processes are reported apart (their summed
VmHWM, which counts the shared buffers once per process that touched them). With
``--compare-sqlite`` the SQLite store of ``history_scale`` is measured right after, in the same
run, so the two backends are compared under the same load.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from benchmarks.areas.history_scale import _environment as _sqlite_environment
from benchmarks.areas.history_scale import _row, _start_up, _train
from benchmarks.history_scale.build import build_store
from benchmarks.history_scale.postgres import build_postgres_store
from tests.store.postgres_server import PostgresServer

DESCRIPTION = "walltime training and daemon start-up on 10^6 / 10^7 jobs in the PostgreSQL store: time, peak RSS"


def _environment(work: Path, dsn: str) -> dict:
    return {**os.environ, "HPCPREDICT_DATA_DIR": str(work), "HPCPREDICT_STORE_BACKEND": "postgres",
            "HPCPREDICT_STORE_DSN": dsn, "HPCPREDICT_DAEMON_LOG_LEVEL": "WARNING",
            "HPCPREDICT_DAEMON_HOOK_SOCKET": "", "HPCPREDICT_DAEMON_METRICS": ""}


def _train_and_start(env: dict, work: Path) -> tuple[dict, dict]:
    return _train(env), _start_up(env, work)


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks run history_scale_postgres",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, nargs="+", default=[1_000_000], help="history sizes (default 10^6)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/hpcpredict-history-scale-postgres"),
                        help="the server's folder and the models, kept between runs")
    parser.add_argument("--compare-sqlite", action="store_true",
                        help="also measure the SQLite store on the same history, right after")
    options = parser.parse_args(args)
    options.cache.mkdir(parents=True, exist_ok=True)
    server = PostgresServer(options.cache / "server").start()
    sizes, headline = {}, {}
    try:
        for total in options.jobs:
            dsn, built = build_postgres_store(server, total)
            work = options.cache / f"{total}"
            work.mkdir(exist_ok=True)
            env = _environment(work, dsn)
            train, start = _train_and_start(env, work)
            sizes[str(total)] = {"store": built, "train": train, "start_up": start,
                                 "server_peak_rss_mib": server.server_rss_mib(),
                                 "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
            size = f"{total:.0e}".replace("+0", "")
            headline[size] = {**_row(train, start), "build_s": built["built_s"], "database_mib": built["database_mib"]}
            if options.compare_sqlite:
                sqlite_work = options.cache / f"sqlite-{total}"
                store = sqlite_work / "history.sqlite"
                sqlite_built = build_store(store, total)
                sqlite_train, sqlite_start = _train_and_start(_sqlite_environment(sqlite_work, store), sqlite_work)
                sizes[str(total)]["sqlite"] = {"store": sqlite_built, "train": sqlite_train, "start_up": sqlite_start,
                                               "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
                headline[f"{size} sqlite"] = _row(sqlite_train, sqlite_start)
    finally:
        server.stop()
    return {"headline": headline, "sizes": sizes}
