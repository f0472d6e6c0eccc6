"""Reading long histories: streamed training, the bounded start-up replay, schema migration.

Real SQLite files and the real KTH-SP2 trace; each test compares the streamed path with the
one that held every job in memory, so a change to either that makes them differ fails here.
"""
from __future__ import annotations

import json
import sqlite3
import tracemalloc
from pathlib import Path

import pytest

from hpcpredict.daemon.lab.history.training import train_model
from hpcpredict.daemon.lab.history.traces import read_trace
from hpcpredict.daemon.recent_history import RecentHistoryModel
from hpcpredict.daemon.records import JobRecord
from hpcpredict.daemon.store import MIGRATIONS, SQLiteStore
from hpcpredict.daemon.lab.history.training import train_from_store

KTH = Path(__file__).resolve().parents[1] / "data" / "traces" / "KTH-SP2.swf"


@pytest.fixture(scope="module")
def kth_jobs():
    return read_trace(KTH)[:4000]


@pytest.fixture
def kth_store(tmp_path, kth_jobs):
    store = SQLiteStore(str(tmp_path / "kth.sqlite"))
    store.add_jobs(kth_jobs, "swf:KTH-SP2.swf")
    yield store
    store.close()


def test_streamed_training_fits_the_same_model_as_the_in_memory_one(kth_store):
    """Same jobs, same order, same state: the full replay part and the remember-only part."""
    in_memory = train_model(list(kth_store.iter_jobs()), replay_last=1500)
    streamed, seen = train_from_store(kth_store, replay_last=1500)
    assert seen == kth_store.count_jobs(scorable=True) > 3000
    assert json.dumps(streamed.to_state(), sort_keys=True) == json.dumps(in_memory.to_state(), sort_keys=True)
    assert streamed.state.trained_until == in_memory.state.trained_until > 0


def test_start_up_replay_reads_only_the_recent_window_and_what_the_model_lacks(kth_store):
    """The history models built from :meth:`recent_jobs` equal those built from every job;
    jobs after ``since_end`` are all there, older ones only when some window keeps them."""
    window = 5
    everything, windowed = RecentHistoryModel(window), RecentHistoryModel(window)
    for record in kth_store.iter_jobs():
        everything.observe(record)
    since = sorted(job.end_time for job in kth_store.iter_jobs())[-300]
    replayed = list(kth_store.recent_jobs(window, since_end=since))
    for record in replayed:
        windowed.observe(record)
    assert {k: list(v) for k, v in windowed._by_user_app.items()} == \
        {k: list(v) for k, v in everything._by_user_app.items()}
    assert {k: list(v) for k, v in windowed._by_user.items()} == {k: list(v) for k, v in everything._by_user.items()}
    assert [r.end_time for r in replayed] == sorted(r.end_time for r in replayed)
    assert sum(1 for r in replayed if r.end_time > since) == sum(1 for r in kth_store.iter_jobs() if r.end_time > since)
    assert len(replayed) < kth_store.count_jobs() / 2   # a window, not the history
    assert len({(r.job_id, r.end_time) for r in replayed}) == len(replayed)   # no job twice


def test_iterating_the_history_does_not_hold_it_in_memory(tmp_path):
    """Python memory while walking 60 000 stored jobs stays far below what the jobs take as a
    list (the store fetches them in batches)."""
    store = SQLiteStore(str(tmp_path / "big.sqlite"))
    store.add_jobs((JobRecord(str(i), f"u{i % 97}", float(i), runtime_s=50.0, requested_time_s=100.0,
                              end_time=i + 50.0, application="app", inputs={"n": i}) for i in range(60_000)), "gen")
    tracemalloc.start()
    try:
        walked = sum(1 for _ in store.iter_jobs())
        streamed_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        held = list(store.iter_jobs())
        list_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        store.close()
    assert walked == len(held) == 60_000
    assert streamed_peak < 8 << 20 < list_peak / 3, (streamed_peak, list_peak)


def test_a_store_at_schema_1_is_migrated_in_place(tmp_path):
    """A store written before the streaming indexes existed opens, keeps its rows, gains them."""
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0] + "; PRAGMA user_version=1;")
    db.execute("INSERT INTO jobs (source, job_id, user, submit_time, runtime_s, state, stored_at) "
               "VALUES ('swf:x', '7', 'ann', 10, 60, 'COMPLETED', 0)")
    db.commit()
    db.close()
    store = SQLiteStore(str(path))
    assert [(r.job_id, r.user) for r in store.jobs_by_submit()] == [("7", "ann")]
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    indexes = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"jobs_submit", "jobs_user_end", "jobs_user_app_end"} <= indexes
    plan = " ".join(str(row) for row in db.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM jobs WHERE runtime_s >= 0 AND submit_time >= 0 "
        "ORDER BY submit_time, end_time, id"))
    assert "jobs_submit" in plan and "TEMP B-TREE" not in plan   # streamed in index order, no sort
    db.close()
