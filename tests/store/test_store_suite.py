"""The store's one interface, the same tests against SQLite and a real PostgreSQL server."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from hpcpredict.daemon.errors import StoreError
from hpcpredict.daemon.lab.history.training import train_model
from hpcpredict.daemon.lab.history.traces import read_trace
from hpcpredict.daemon.recent_history import RecentHistoryModel
from hpcpredict.daemon.records import JobRecord
from hpcpredict.daemon.store import PredictionRow
from hpcpredict.daemon.lab.history.training import train_from_store

KTH = Path(__file__).resolve().parents[1] / "data" / "traces" / "KTH-SP2.swf"


def record(job_id, end, runtime=100.0, user="u", state="COMPLETED", cluster="", partition="batch"):
    return JobRecord(job_id=job_id, user=user, submit_time=end - runtime - 10, runtime_s=runtime, end_time=end,
                     state=state, application="app", inputs={"size": 4.0}, cluster=cluster, partition=partition)


def prediction(prediction_id, job_id, runtime=120.0, created=1.0, cluster="", bound=200.0, user="u"):
    return PredictionRow(prediction_id, job_id, "submit", user, "app", created, runtime, 90.0, 150.0, bound, 0.0,
                         None, "hpcpredict", "7", False, b"\x01\x00", cluster)


@pytest.fixture(scope="module")
def kth_jobs():
    return read_trace(KTH)[:3000]


def test_round_trip_idempotence_and_end_time_order(store):
    assert store.add_jobs([record("2", 200), record("1", 100)], "swf:t") == (2, 0)
    assert store.add_jobs([record("1", 100)], "swf:t") == (0, 1)
    assert store.record_outcome(record("9", 150), prediction_id="p")
    assert not store.record_outcome(record("9", 150))
    assert [r.job_id for r in store.iter_jobs()] == ["1", "9", "2"]
    assert [r.job_id for r in store.iter_jobs(since_end=150)] == ["9", "2"]
    first = next(store.iter_jobs())
    assert (first.inputs, first.user, first.partition) == ({"size": 4.0}, "u", "batch")
    store.record_prediction(prediction("p", "9"))
    assert store.prediction("p") == prediction("p", "9")
    assert store.prediction("nope") is None
    assert store.counts() == {"jobs": 3, "outcomes": 1, "predictions": 1}
    assert store.recent_accuracy()["accuracy"] == pytest.approx(100 / 120)


def test_jobs_and_predictions_are_keyed_by_cluster(store):
    assert store.record_outcome(record("7", 100, cluster="alpha"))
    assert store.record_outcome(record("7", 100, runtime=50.0, cluster="beta"))
    assert not store.record_outcome(record("7", 100, cluster="alpha"))
    store.record_prediction(prediction("pa", "7", created=5.0, cluster="alpha"))
    store.record_prediction(prediction("pb", "7", created=6.0, cluster="beta"))
    assert store.prediction_for_job("7", cluster="alpha").prediction_id == "pa"
    assert store.prediction_for_job("7").prediction_id == "pb"
    assert store.prediction_for_job("7", since=7.0) is None
    assert store.count_jobs(cluster="beta") == 1
    assert [r["runtime_s"] for r in store.job_rows("7", cluster="beta")] == [50.0]


def test_a_jobs_prediction_is_looked_up_with_its_user(store):
    """Anyone's prediction may carry a job id; the outcome of bob's job asks for bob's."""
    store.record_prediction(prediction("bob-alloc", "7", created=5.0, user="bob"))
    store.record_prediction(prediction("eve-later", "7", created=6.0, user="eve"))
    assert store.prediction_for_job("7").prediction_id == "eve-later"
    assert store.prediction_for_job("7", user="bob").prediction_id == "bob-alloc"
    assert store.prediction_for_job("7", user="carol") is None
    assert store.prediction_for_job("7", user="bob", since=5.5) is None


def test_streamed_training_and_start_up_replay(store, kth_jobs):
    store.add_jobs(kth_jobs, "swf:KTH-SP2.swf")
    in_memory = train_model(list(store.iter_jobs()), replay_last=1000)
    streamed, seen = train_from_store(store, replay_last=1000)
    assert seen == store.count_jobs(scorable=True) > 2500
    assert json.dumps(streamed.to_state(), sort_keys=True) == json.dumps(in_memory.to_state(), sort_keys=True)
    window = 4
    everything, windowed = RecentHistoryModel(window), RecentHistoryModel(window)
    for job in store.iter_jobs():
        everything.observe(job)
    since = sorted(job.end_time for job in store.iter_jobs())[-200]
    replayed = list(store.recent_jobs(window, since_end=since))
    for job in replayed:
        windowed.observe(job)
    assert {k: list(v) for k, v in windowed._by_user_app.items()} == \
        {k: list(v) for k, v in everything._by_user_app.items()}
    assert [r.end_time for r in replayed] == sorted(r.end_time for r in replayed)
    assert sum(r.end_time > since for r in replayed) == sum(r.end_time > since for r in store.iter_jobs())
    assert len(replayed) < store.count_jobs() / 2


def test_lookups_for_explain_report_and_metrics(store):
    store.add_jobs([record("1", 100, user="ann"), record("2", 200, user="ann")], "swf:t")
    store.record_outcome(record("3", 300, runtime=100.0, user="ann"), prediction_id="p3")
    store.record_outcome(record("4", 400, runtime=300.0, user="ann", state="TIMEOUT", partition="short"),
                         prediction_id="p4")
    store.record_prediction(prediction("p3", "3", runtime=50.0))
    store.record_prediction(prediction("p4", "4", runtime=100.0, bound=150.0))
    assert [row["source"] for row in store.job_rows("3")] == ["outcome"]
    assert [p.prediction_id for p in store.job_predictions("3", ["p3"])] == ["p3"]
    assert [j.job_id for j in store.user_history("ann", 300.0, 5)] == ["1", "2"]
    rows = store.outcome_rows(user="ann", since=250.0)
    assert [(row[1], row[12]) for row in rows] == [("3", 50.0), ("4", 100.0)]   # job id, predicted
    assert store.outcome_rows(user="bob") == []
    accuracy = store.partition_accuracy(since=0.0)
    assert accuracy["batch"] == {"accuracy": 0.5, "under_rate": 1.0, "kill_rate": 0.0, "n": 1}
    assert accuracy["short"]["kill_rate"] == 1.0


def test_two_stores_on_one_history_write_together_and_see_each_other(backend):
    """Two daemons on one store (PostgreSQL: two servers' daemons; SQLite: two processes'
    connections to one file): concurrent outcomes, none lost, none counted twice."""
    _, open_store = backend
    first, second = open_store(), open_store()
    stored: list[bool] = []

    def report(store, offset):
        for number in range(60):
            stored.append(store.record_outcome(record(str(number + offset), 1000.0 + number)))

    try:
        threads = [threading.Thread(target=report, args=(first, 0)), threading.Thread(target=report, args=(second, 30))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert stored.count(True) == 90 and stored.count(False) == 30   # 30 job ids reported by both
        assert first.counts()["outcomes"] == second.counts()["outcomes"] == 90
        assert len({r.job_id for r in second.iter_jobs()}) == 90
    finally:
        first.close()
        second.close()


def test_an_unreachable_postgres_is_a_store_error_not_a_crash(tmp_path):
    from hpcpredict.daemon.store import PostgresStore

    dsn = f"host={tmp_path} dbname=none user=nobody connect_timeout=2"
    with pytest.raises(StoreError, match="cannot connect"):
        PostgresStore(dsn)
    lazy = PostgresStore(dsn, lazy=True, retry_s=0.0)   # the daemon: opens later, fails each call
    with pytest.raises(StoreError):
        lazy.counts()
    lazy.close()


def test_start_up_replay_keeps_each_users_last_jobs_of_every_application(store):
    """Several applications per user (the keys the replay walks one index seek at a time)."""
    jobs = [JobRecord(str(n), f"u{n % 3}", float(n), runtime_s=10.0 + n, end_time=n + 10.0 + n,
                      application=("", "lmp", "gmx", "vasp")[n % 4], state="COMPLETED") for n in range(120)]
    store.add_jobs(jobs, "gen")
    everything, windowed = RecentHistoryModel(2), RecentHistoryModel(2)
    for job in store.iter_jobs():
        everything.observe(job)
    replayed = list(store.recent_jobs(2))
    for job in replayed:
        windowed.observe(job)
    assert len(everything._by_user_app) == 12   # 3 users x 4 applications
    assert {k: list(v) for k, v in windowed._by_user_app.items()} == \
        {k: list(v) for k, v in everything._by_user_app.items()}
    assert {k: list(v) for k, v in windowed._by_user.items()} == {k: list(v) for k, v in everything._by_user.items()}
    assert len(replayed) == 24   # 2 per (user, application); each user's last 2 are among them


def test_retention_deletes_old_and_surplus_predictions_and_keeps_outcomes(store):
    now = 1_700_000_000.0
    for index in range(10):
        store.record_prediction(prediction(f"old{index}", f"j{index}", created=now - 100 * 86400 - index))
    for index in range(30):
        store.record_prediction(prediction(f"new{index:02d}", f"k{index}", created=now - 30 + index))
    store.record_outcome(record("j1", now - 99 * 86400), prediction_id="old1")
    assert store.prune_predictions(keep_days=90, keep_rows=0, now=now) == 10
    assert store.prune_predictions(keep_days=90, keep_rows=20, now=now) == 10
    assert store.counts()["predictions"] == 20 and store.counts()["outcomes"] == 1
    assert store.prediction("new09") is None and store.prediction("new10") is not None


def test_decided_and_started_limits_round_trip_and_reach_the_report(store):
    """What the daemon decided and what PrologSlurmctld read back are stored apart, and
    ``report`` counts a job killed under a limit we decided below its --time whatever the mode
    was called (22.05's "soft" --time-min is a kill limit), and not one killed at its own --time."""
    from dataclasses import replace

    from hpcpredict.daemon.cli.report import outcome_frame, summarize

    def submitted(pid, job, **limits):
        return replace(prediction(pid, job, runtime=200.0, created=50.0, bound=300.0), requested_time_s=1200.0,
                       **limits)

    def allocated(pid, job, **read):
        return replace(prediction(pid, job, runtime=200.0, created=900.0, bound=300.0), stage="allocation", **read)

    rows = [  # (job, state, runtime, request, submission decision, allocation read-back)
        ("1", "TIMEOUT", 245.0, 1200, dict(decided_time_min_s=240, policy_mode="soft", policy_reason="soft_time_min"),
         dict(started_time_limit_s=240, started_time_min_s=240)),    # 22.05: "soft", started under 4 min
        ("2", "TIMEOUT", 1205.0, 1200, dict(decided_time_min_s=240, policy_mode="soft", policy_reason="soft_time_min"),
         dict(started_time_limit_s=1200, started_time_min_s=240)),   # 24.11: soft for real, killed at its --time
        ("3", "TIMEOUT", 250.0, 1200, dict(policy_mode="advise", policy_reason="advise_only"),
         dict(started_time_limit_s=240, started_time_min_s=240)),    # the user's own --time-min
        ("4", "TIMEOUT", 600.0, 0, dict(decided_time_limit_s=600, policy_mode="bound", policy_reason="time_limit"),
         dict(started_time_limit_s=600)),                            # no --time: the hook's
        ("5", "TIMEOUT", 300.0, 1200, dict(decided_time_min_s=300, policy_mode="bound", policy_reason="time_min"),
         None),                                                      # no read-back (older hooks): its runtime
        ("6", "COMPLETED", 200.0, 1200, dict(decided_time_min_s=240, policy_mode="soft"),
         dict(started_time_limit_s=240, started_time_min_s=240)),
    ]
    for job, state, runtime, request, decided, read in rows:
        outcome = replace(record(job, 1000.0 + int(job), runtime=runtime, user="u", state=state),
                          requested_time_s=float(request))
        assert store.record_outcome(outcome, prediction_id=f"s{job}")
        store.record_prediction(replace(submitted(f"s{job}", job, **decided), requested_time_s=float(request)))
        if read is not None:
            store.record_prediction(allocated(f"a{job}", job, **read))
    assert store.prediction("s1").decided_time_min_s == 240 and store.prediction("s1").policy_mode == "soft"
    assert (store.prediction("a1").started_time_limit_s, store.prediction("a1").started_time_min_s) == (240, 240)
    assert store.prediction("a4").started_time_min_s is None
    frame = outcome_frame(store)
    by_job = {row.job_id: row for row in frame.itertuples(index=False)}
    assert by_job["1"].started_time_limit_s == 240 and by_job["4"].decided_time_limit_s == 600
    from hpcpredict.daemon.cli.report import killed
    assert {job: killed(row) for job, row in by_job.items()} == \
        {"1": True, "2": False, "3": False, "4": True, "5": True, "6": False}
    assert int(summarize(frame).loc["u", "killed_by_our_limit"]) == 3
    from hpcpredict.daemon.cli.explain import explain_job, explanation_lines

    result = explain_job(store, "1")
    assert result.limits == {"requested_time_s": 1200.0, "policy_mode": "soft", "decided_time_min_s": 240,
                             "decided_time_limit_s": None, "decided_at_allocation_time_limit_s": None,
                             "applied_time_min_s": 240, "started_time_limit_s": 240, "lowered_at_start": True,
                             "ran_time_limit_s": 240.0, "killed_by_our_limit": True}
    text = "\n".join(explanation_lines(result))
    assert "decided: --time-min 00:04:00 (soft: planned with it" in text, text
    assert "started under: TimeLimit 00:04:00 (lowered at start" in text and "killed by our limit" in text, text
    soft = explain_job(store, "2").limits
    assert (soft["lowered_at_start"], soft["killed_by_our_limit"]) == (False, False)
    assert "at the user's own limit, not ours" in "\n".join(explanation_lines(explain_job(store, "2")))


def _old_schema_row(execute) -> None:
    execute('INSERT INTO predictions (prediction_id, job_id, stage, "user", application, created, runtime_s, low_s, '
            "high_s, bound_s, model_name, model_version, fallback, applied_time_min_s, policy_mode, policy_reason) "
            "VALUES ('old', '1', 'submit', 'u', 'app', 1.0, 200.0, 100.0, 300.0, 300.0, 'm', '1', 0, 240, 'soft', "
            "'soft_time_min')")


def test_a_store_of_the_previous_schema_keeps_its_decisions_as_decided(tmp_path, monkeypatch):
    """Level 4's applied_* columns held what the daemon decided: migrated, they read as decided."""
    import sqlite3

    from hpcpredict.daemon.store import sqlite as store_module

    path = str(tmp_path / "old.sqlite")
    monkeypatch.setattr(store_module, "MIGRATIONS", store_module.MIGRATIONS[:4])
    store_module.SQLiteStore(path).close()
    db = sqlite3.connect(path)
    _old_schema_row(db.execute)
    db.commit()
    db.close()
    monkeypatch.undo()
    migrated = store_module.SQLiteStore(path)
    try:
        row = migrated.prediction("old")
        assert (row.decided_time_min_s, row.decided_time_limit_s, row.started_time_limit_s, row.policy_mode) == \
            (240, None, None, "soft")
    finally:
        migrated.close()


def test_a_postgres_store_of_the_previous_schema_keeps_its_decisions_as_decided(postgres_server, monkeypatch):
    import psycopg

    from hpcpredict.daemon.store import postgres as postgres_module

    dsn = postgres_server.new_database()
    monkeypatch.setattr(postgres_module, "MIGRATIONS", postgres_module.MIGRATIONS[:2])
    postgres_module.PostgresStore(dsn).close()
    with psycopg.connect(dsn, autocommit=True) as db:
        _old_schema_row(db.execute)
    monkeypatch.undo()
    migrated = postgres_module.PostgresStore(dsn)
    try:
        row = migrated.prediction("old")
        assert (row.decided_time_min_s, row.decided_time_limit_s, row.started_time_limit_s, row.policy_mode) == \
            (240, None, None, "soft")
    finally:
        migrated.close()
