"""What people look up: `hpcpredict explain` / `report` and the accuracy gauges, on a real
daemon that predicted jobs and was told how they ended; the Grafana dashboard against the
metrics that daemon really exports."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import grpc
import pytest

from hpcpredict.daemon.store import SQLiteStore
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from hpcpredict.proto.v1 import hpcpredict_pb2_grpc as pb_grpc

DASHBOARD = Path(__file__).resolve().parents[2] / "contrib" / "grafana" / "hpcpredict.json"
KTH = Path(__file__).resolve().parents[1] / "data" / "traces" / "KTH-SP2.swf"


def job(user, partition, job_id="", time_limit_s=7200):
    return pb.JobRequest(job=pb.JobIdentity(user=user, application="lmp", job_name="run", partition=partition),
                         resources=pb.Resources(nodes=2, ntasks=8), time_limit_s=time_limit_s, job_id=job_id)


def cli(data_dir, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", *args], capture_output=True, text=True,
                          env={**os.environ, "HPCPREDICT_DATA_DIR": str(data_dir)}, timeout=120)


def scrape(daemon) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{daemon.info['metrics_port']}/metrics", timeout=10).read().decode()


def gauge(text: str, name: str, partition: str) -> float:
    found = re.search(rf'^{name}{{partition="{partition}"}} (\S+)$', text, re.M)
    assert found, f"{name}{{partition={partition}}} not exported"
    return float(found.group(1))


@pytest.fixture
def predicted_world(daemon):
    """alice: three ended jobs, then job 501 predicted and ended (batch); bob: two ended jobs,
    then job 602 predicted and killed (TIMEOUT) at 15 min of its 20 (short): at our limit."""
    now = int(time.time())
    with grpc.insecure_channel(f"unix:{daemon.socket}") as channel:
        stub = pb_grpc.PredictorStub(channel)
        for number, elapsed in enumerate((1800.0, 2400.0, 3000.0)):
            stub.ReportOutcome(pb.Outcome(job_id=f"40{number}", elapsed_s=elapsed, state="COMPLETED",
                                          submit_time=now - 9000 + number, end_time=now - 5000 + number,
                                          request=job("alice", "batch")), timeout=5)
        alice = stub.Predict(job("alice", "batch", "501"), timeout=5)
        stub.ReportOutcome(pb.Outcome(job_id="501", prediction_id=alice.prediction_id, elapsed_s=3600.0,
                                      state="COMPLETED", submit_time=now - 4000, end_time=now - 100), timeout=5)
        for number, elapsed in enumerate((600.0, 700.0)):
            stub.ReportOutcome(pb.Outcome(job_id=f"59{number}", elapsed_s=elapsed, state="COMPLETED",
                                          submit_time=now - 9000, end_time=now - 6000 + number,
                                          request=job("bob", "short", time_limit_s=1200)), timeout=5)
        bob = stub.Predict(job("bob", "short", "602", time_limit_s=1200), timeout=5)
        stub.ReportOutcome(pb.Outcome(job_id="602", prediction_id=bob.prediction_id, elapsed_s=900.0,
                                      state="TIMEOUT", submit_time=now - 3000, end_time=now - 50), timeout=5)
    assert not alice.fallback and not bob.fallback
    return alice, bob


def test_accuracy_gauges_per_partition(daemon, predicted_world):
    alice, bob = predicted_world
    text = scrape(daemon)
    expected = min(alice.runtime_s, 3600.0) / max(alice.runtime_s, 3600.0)
    assert gauge(text, "hpcpredict_partition_accuracy", "batch") == pytest.approx(expected)
    assert gauge(text, "hpcpredict_partition_under_prediction_ratio", "batch") == (1.0 if alice.runtime_s < 3600 else 0.0)
    assert gauge(text, "hpcpredict_partition_kill_ratio", "batch") == 0.0
    assert gauge(text, "hpcpredict_partition_kill_ratio", "short") == 1.0
    assert gauge(text, "hpcpredict_partition_scored_jobs", "short") == 1.0   # outcomes without a prediction: not scored


def test_explain_shows_prediction_inputs_limits_outcome_error_and_history(daemon, predicted_world):
    alice, _ = predicted_world
    scrape(daemon)   # the scrape commits journaled predictions, as the daemon's flusher would
    done = cli(daemon.data_dir, "explain", "501", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["job"]["state"] == "COMPLETED" and result["job"]["runtime_s"] == 3600.0
    [submit] = result["predictions"]
    assert (submit["prediction_id"], submit["model"], submit["model_version"]) == \
        (alice.prediction_id, alice.model_name, alice.model_version)
    assert submit["inputs"]["resources"]["ntasks"] == 8 and submit["inputs"]["time_limit_s"] == 7200
    # what the daemon told the hook, as stored: never recomputed
    assert (submit["set_time_min_s"] or 0, submit["set_time_limit_s"] or 0, submit["policy_mode"], submit["policy"]) == \
        (alice.apply_time_min_s, alice.apply_time_limit_s, alice.policy_mode, alice.policy_reason)
    assert alice.policy_mode == "advise"   # the default (auto) where no controller runs time_min_as_soft_limit
    assert submit["error"]["accuracy"] == pytest.approx(min(alice.runtime_s, 3600) / max(alice.runtime_s, 3600))
    assert [past["job_id"] for past in result["history"]] == ["400", "401", "402"]
    text = cli(daemon.data_dir, "explain", "501").stdout
    assert "Prediction at submit" in text and "error: predicted/actual" in text
    missing = cli(daemon.data_dir, "explain", "999")
    assert missing.returncode == 1 and "no job 999" in missing.stderr


def test_report_tables_and_plot(daemon, predicted_world, tmp_path):
    scrape(daemon)
    plot = tmp_path / "report.png"
    done = cli(daemon.data_dir, "report", "--json", "--plot", str(plot))
    assert done.returncode == 0, done.stderr
    rows = {row["user"]: row for row in json.loads(done.stdout)["rows"]}
    assert (rows["alice"]["jobs"], rows["alice"]["predicted"], rows["alice"]["killed_by_our_limit"]) == (4, 1, 0)
    # bob's TIMEOUT below his --time: the daemon ran in advise mode and decided no limit, so not ours
    # (tests/store/test_store_suite.py counts the kills under limits we decided)
    assert (rows["bob"]["jobs"], rows["bob"]["killed_by_our_limit"]) == (3, 0)
    assert rows["alice"]["used_h"] == pytest.approx((1800 + 2400 + 3000 + 3600) * 8 / 3600)
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    only = json.loads(cli(daemon.data_dir, "report", "--json", "--user", "bob").stdout)["rows"]
    assert [row["user"] for row in only] == ["bob"]
    future = cli(daemon.data_dir, "report", "--since", "2999-01-01")
    assert future.returncode == 1 and "no ended job" in future.stderr
    assert cli(daemon.data_dir, "report", "--since", "yesterday").returncode == 1


def test_explain_and_report_on_the_kth_trace(tmp_path):
    """Ingested accounting history (no predictions): the job, the user's history, the report."""
    assert cli(tmp_path, "ingest", str(KTH)).returncode == 0
    result = json.loads(cli(tmp_path, "explain", "1000", "--json").stdout)
    assert result["job"]["user"] == "13" and result["predictions"] == []
    assert len(result["history"]) == 5 and all(past["end_time"] <= result["job"]["submit_time"]
                                               for past in result["history"])
    rows = json.loads(cli(tmp_path, "report", "--json").stdout)["rows"]
    store = SQLiteStore(str(tmp_path / "hpcpredict.sqlite"))
    assert sum(row["jobs"] for row in rows) == store.count_jobs()
    store.close()
    assert all(row["request_accuracy"] is None or 0 < row["request_accuracy"] <= 1 for row in rows)
    # the trace's real dates (its header's UnixStartTime: 1996-09-23; it ends in 1997-08)
    later = json.loads(cli(tmp_path, "report", "--json", "--since", "1997-01-01").stdout)["all"]["jobs"]
    assert 0 < later < sum(row["jobs"] for row in rows)


def test_every_dashboard_query_names_a_metric_the_daemon_exports(daemon, predicted_world):
    text = scrape(daemon)
    # samples, and families declared without samples now (no fault active: hpcpredict_fault)
    exported = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    exported |= set(re.findall(r"^# TYPE (\S+) gauge$", text, re.M))
    dashboard = json.loads(DASHBOARD.read_text())
    queries = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    queries += [variable["query"]["query"] for variable in dashboard["templating"]["list"]
                if isinstance(variable.get("query"), dict)]
    assert len(queries) >= 10
    for query in queries:
        names = set(re.findall(r"\bhpcpredict_[a-z_]+", query))
        assert names, f"query names no hpcpredict metric: {query}"
        assert names <= exported, f"{query}: {sorted(names - exported)} not exported"


def test_one_accuracy_in_status_metrics_and_report(daemon, predicted_world):
    """The same jobs give the same accuracy everywhere: a fallback answer (carol has no history:
    her request answered) is not a model's prediction in any of the three."""
    alice, _ = predicted_world
    now = int(time.time())
    with grpc.insecure_channel(f"unix:{daemon.socket}") as channel:
        stub = pb_grpc.PredictorStub(channel)
        carol = stub.Predict(job("carol", "batch", "701"), timeout=5)
        stub.ReportOutcome(pb.Outcome(job_id="701", prediction_id=carol.prediction_id, elapsed_s=600.0,
                                      state="COMPLETED", submit_time=now - 2000, end_time=now - 20), timeout=5)
    assert carol.fallback
    batch = gauge(scrape(daemon), "hpcpredict_partition_accuracy", "batch")
    assert batch == pytest.approx(min(alice.runtime_s, 3600.0) / max(alice.runtime_s, 3600.0))
    report = json.loads(cli(daemon.data_dir, "report", "--json", "--user", "alice").stdout)["all"]
    carol_row = json.loads(cli(daemon.data_dir, "report", "--json", "--user", "carol").stdout)["rows"][0]
    assert report["our_accuracy"] == pytest.approx(batch) and carol_row["predicted"] == 0
    status = json.loads(cli(daemon.data_dir, "status", "--json").stdout)
    everyone = json.loads(cli(daemon.data_dir, "report", "--json").stdout)["all"]
    assert status["recent_accuracy"]["accuracy"] == pytest.approx(everyone["our_accuracy"])
    assert status["recent_accuracy"]["n"] == everyone["predicted"] == 2     # alice's and bob's
    assert status["jobs"] == 8 and status["outcomes"] == 8     # counts are numbers in --json, not strings
    assert status["models"] and all(model["bundled"] for model in status["models"])   # nothing published here
    text = cli(daemon.data_dir, "status").stdout
    assert "none published by this site" in text and "bundled example" in text, text
