"""Several clusters in one store and one daemon: jobs, predictions and outcomes are keyed by
(cluster, job id); a daemon serves the clusters it is configured for; models per cluster or
shared. Real SQLite files, the real daemon, the real CLI."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from hpcpredict.daemon.records import JobRecord
from hpcpredict.daemon.store import MIGRATIONS, PredictionRow, SQLiteStore
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from hpcpredict.proto.v1 import hpcpredict_pb2_grpc as pb_grpc
from tests.daemon.daemonproc import DaemonProcess

KTH = Path(__file__).resolve().parents[1] / "data" / "traces" / "KTH-SP2.swf"
EAGLE = Path(__file__).resolve().parents[1] / "data" / "traces" / "eagle-sample-1000.csv"


def ended(job_id, cluster, runtime=100.0, user="ann"):
    return JobRecord(job_id, user, 1000.0, runtime_s=runtime, end_time=1100.0 + runtime, state="COMPLETED",
                     cluster=cluster)


def prediction(prediction_id, job_id, cluster, created=5.0):
    return PredictionRow(prediction_id, job_id, "allocation", "ann", "app", created, 60.0, 50.0, 70.0, 90.0, 0.0,
                         None, "m", "1", False, b"", cluster)


def test_the_same_job_id_on_two_clusters_is_two_jobs(tmp_path):
    store = SQLiteStore(str(tmp_path / "s.sqlite"), journal_bytes=1 << 16)
    assert store.record_outcome(ended("7", "alpha"))
    assert store.record_outcome(ended("7", "beta", runtime=300.0))
    assert not store.record_outcome(ended("7", "alpha"))            # a duplicate on its own cluster
    assert store.add_jobs([ended("7", "alpha"), ended("7", "gamma")], "sacct") == (2, 0)
    assert sorted((r.cluster, r.runtime_s) for r in store.iter_jobs() if r.job_id == "7") == \
        [("alpha", 100.0), ("alpha", 100.0), ("beta", 300.0), ("gamma", 100.0)]
    store.record_prediction(prediction("pa", "7", "alpha"))
    store.record_prediction(prediction("pb", "7", "beta", created=6.0))
    # journaled (not yet committed) and committed rows answer alike
    assert store.prediction_for_job("7", cluster="alpha").prediction_id == "pa"
    store.flush()
    assert store.prediction_for_job("7", cluster="alpha").prediction_id == "pa"
    assert store.prediction_for_job("7", cluster="beta").cluster == "beta"
    assert store.prediction_for_job("7").prediction_id == "pb"      # any cluster: the latest
    assert store.count_jobs(cluster="beta") == 1 and store.count_jobs() == 4
    assert [row["cluster"] for row in store.job_rows("7", cluster="beta")] == ["beta"]
    store.close()


def test_a_store_without_clusters_is_migrated_keeping_its_rows(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript(MIGRATIONS[0] + ";" + MIGRATIONS[1] + "; PRAGMA user_version=2;")
    db.execute("INSERT INTO jobs (id, source, job_id, user, submit_time, runtime_s, state, prediction_id, stored_at) "
               "VALUES (41, 'outcome', '7', 'ann', 10, 60, 'COMPLETED', 'p7', 0)")
    db.execute("INSERT INTO predictions (prediction_id, job_id, stage, created, runtime_s, low_s, high_s, bound_s, "
               "model_name, model_version, fallback) VALUES ('p7', '7', 'submit', 1, 50, 40, 60, 80, 'm', '1', 0)")
    db.commit()
    db.close()
    store = SQLiteStore(str(path))
    [row] = store.job_rows("7")
    assert (row["cluster"], row["prediction_id"], row["user"]) == ("", "p7", "ann")
    assert store.prediction("p7").cluster == ""
    assert store.record_outcome(ended("7", "alpha"))                 # another cluster's job 7 is new
    assert not store.record_outcome(JobRecord("7", "ann", 10.0, runtime_s=60.0, state="COMPLETED"))
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT id FROM jobs WHERE cluster = ''").fetchall() == [(41,)]
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()


def _job(user, cluster="", job_id="", time_limit_s=3600):
    return pb.JobRequest(job=pb.JobIdentity(user=user, application="lmp", cluster=cluster),
                         resources=pb.Resources(nodes=1, ntasks=4), time_limit_s=time_limit_s, job_id=job_id)


def test_a_daemon_serves_its_clusters_only_and_keys_outcomes_by_cluster(world_dir):
    daemon = DaemonProcess(world_dir, env={"HPCPREDICT_DAEMON_CLUSTERS": "alpha,beta"}).start()
    try:
        with grpc.insecure_channel(f"unix:{daemon.socket}") as channel:
            stub = pb_grpc.PredictorStub(channel)
            with pytest.raises(grpc.RpcError) as refused:
                stub.Predict(_job("ann", "gamma"), timeout=5)
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "job.cluster" in refused.value.details() and "gamma" in refused.value.details()
            for cluster, elapsed in (("", 600.0), ("beta", 1200.0)):
                ack = stub.ReportOutcome(pb.Outcome(job_id="7", elapsed_s=elapsed, state="COMPLETED",
                                                    end_time=1_700_000_000, request=_job("ann", cluster)), timeout=5)
                assert ack.stored and not ack.duplicate
            again = stub.ReportOutcome(pb.Outcome(job_id="7", elapsed_s=600.0, state="COMPLETED",
                                                  end_time=1_700_000_000, request=_job("ann", "alpha")), timeout=5)
            assert again.duplicate      # no cluster named = the first configured one (alpha)
            estimate = stub.Predict(_job("ann", job_id="8"), timeout=5)
    finally:
        daemon.stop()
    store = SQLiteStore(str(world_dir / "hpcpredict.sqlite"))
    assert sorted((r.cluster, r.runtime_s) for r in store.iter_jobs()) == [("alpha", 600.0), ("beta", 1200.0)]
    assert store.prediction(estimate.prediction_id).cluster == "alpha"
    store.close()


def _cli(data_dir, *args):
    done = subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", *args], capture_output=True, text=True,
                          env={**os.environ, "HPCPREDICT_DATA_DIR": str(data_dir)}, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_cluster_trained_on_its_own_jobs_is_served_its_own_model(world_dir):
    """ingest -M / train -M: alpha's model, trained on alpha's jobs (KTH-SP2) only, is
    published under its name and answers alpha's jobs; beta (Eagle) has none of its own and is
    answered by the shared model, trained on both."""
    _cli(world_dir, "ingest", "--no-reload", "-M", "alpha", str(KTH))
    _cli(world_dir, "ingest", "--no-reload", "-M", "beta", str(EAGLE))
    own = json.loads(_cli(world_dir, "train", "--no-reload", "--json", "-M", "alpha"))
    shared = json.loads(_cli(world_dir, "train", "--no-reload", "--json"))
    assert own["jobs"] == 28481 and shared["jobs"] > own["jobs"]
    assert "/walltime/alpha/" in own["path"] and "/walltime/_site/" in shared["path"]
    explained = json.loads(_cli(world_dir, "explain", "1000", "-M", "alpha", "--json"))
    assert explained["job"]["cluster"] == "alpha"
    assert subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "explain", "1000", "-M", "beta"],
                          env={**os.environ, "HPCPREDICT_DATA_DIR": str(world_dir)}, capture_output=True,
                          text=True).returncode == 1
    daemon = DaemonProcess(world_dir, env={"HPCPREDICT_DAEMON_CLUSTERS": "alpha,beta"}).start()
    try:
        with grpc.insecure_channel(f"unix:{daemon.socket}") as channel:
            stub = pb_grpc.PredictorStub(channel)
            eagle_user_on_beta = stub.Predict(_job("user0014", "beta", time_limit_s=172800), timeout=5)
            eagle_user_on_alpha = stub.Predict(_job("user0014", "alpha", time_limit_s=172800), timeout=5)
            kth_user_on_alpha = stub.Predict(_job("13", "alpha"), timeout=5)
    finally:
        daemon.stop()
    assert eagle_user_on_beta.model_name == "hpcpredict [walltime/_site]"     # the shared model
    assert kth_user_on_alpha.model_name == "hpcpredict [walltime/alpha]"      # alpha's own
    # alpha's own model never saw user0014: it falls back, the recent-history model answers
    assert eagle_user_on_alpha.model_name == "recent-history"
