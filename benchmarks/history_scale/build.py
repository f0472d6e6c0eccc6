"""A long history made of real traces: KTH-SP2 and HPC2N replayed back to back, shifted.

Copy k of a trace is shifted in time so that it starts one hour after the previous copy ended,
so the history is one continuous, time-ordered stream of real jobs (10^7 jobs span ~350
years of these small machines' accounting). Users are renamed ``g<k mod USER_GROUPS>:<trace>:<user>``:
5,775 users in a 10^6 or 10^7 history (50 groups of KTH-SP2's and HPC2N's users), and a
user's history goes on from one copy to the next of the same group, as years of accounting do
at a real site, instead of every copy adding new users. The traces name no application
(SWF executable -1), so each user has one (user, application) key. Runtimes, requests, sizes, states and applications are the
traces' own, unchanged. Job ids are ``<copy>.<id>``. Rows go through :meth:`SQLiteStore.add_jobs`
(the ingest path) from a generator: building 10^7 jobs holds one batch in memory.
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Iterator

from hpcpredict.daemon.lab.history import read_trace
from hpcpredict.daemon.records import JobRecord
from hpcpredict.daemon.store import SQLiteStore

ROOT = Path(__file__).resolve().parents[2]
TRACES = (ROOT / "tests" / "data" / "traces" / "KTH-SP2.swf", ROOT / "tests" / "data" / "traces" / "hpc2n-subset.swf")
USER_GROUPS = 50


def replayed_jobs(total: int) -> Iterator[JobRecord]:
    """``total`` jobs: the traces in turn, copy after copy, shifted and renamed (module doc)."""
    traces = []
    for path in TRACES:
        jobs = [job for job in read_trace(path) if job.runtime_s >= 0 and job.submit_time >= 0]
        first = min(job.submit_time for job in jobs)
        span = max((job.end_time if job.end_time >= 0 else job.submit_time + job.runtime_s) for job in jobs) - first
        traces.append((path.stem, jobs, first, span))
    made, copy, offset = 0, 0, 0.0
    while True:
        name, jobs, first, span = traces[copy % len(traces)]
        shift = offset - first
        group = f"g{copy % USER_GROUPS}:{name}"
        for job in jobs:
            yield dataclasses.replace(
                job, job_id=f"{copy}.{job.job_id}", user=f"{group}:{job.user}", submit_time=job.submit_time + shift,
                start_time=job.start_time + shift if job.start_time >= 0 else -1.0,
                end_time=job.end_time + shift if job.end_time >= 0 else -1.0)
            made += 1
            if made == total:
                return
        offset += span + 3600.0
        copy += 1


def build_store(path: Path, total: int) -> dict:
    """The store at ``path`` holding ``total`` replayed jobs (reused when it already does)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    store = SQLiteStore(str(path), synchronous="OFF")   # a benchmark fixture: no fsync per batch
    opened = time.perf_counter() - started   # a store built by an older schema is migrated here
    facts = fill_store(store, total, opened, f"{path}")
    return {**facts, "store_mib": round(path.stat().st_size / 2**20)}


def fill_store(store, total: int, opened: float, where: str) -> dict:
    """Add the ``total`` replayed jobs to an empty store (any backend) and close it; a store
    that already holds them is reused. Build facts: jobs, seconds, whether reused."""
    try:
        have = store.count_jobs()
        if have == total:
            return {"jobs": total, "built_s": 0.0, "reused": True, "open_and_migrate_s": round(opened, 1)}
        if have:
            raise SystemExit(f"{where} holds {have} jobs, not {total}: remove it")
        started = time.perf_counter()
        added, _ = store.add_jobs(replayed_jobs(total), "replay:KTH-SP2+HPC2N")
        return {"jobs": added, "built_s": round(time.perf_counter() - started, 1), "reused": False}
    finally:
        store.close()
