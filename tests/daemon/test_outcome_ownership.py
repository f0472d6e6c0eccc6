"""A prediction belongs to its job and its user: what an attacker can put in a job's fields or
in a Predict (a prediction id everyone sees in `scontrol show job`, a job id) never ties her
jobs to another user's prediction, never builds her outcome from his stored request and never
moves his limits. The transport-free service, as the hooks (root) and an ordinary user call it."""
from __future__ import annotations

import pytest

from hpcpredict.daemon.config import load_config
from hpcpredict.daemon.server import Daemon
from hpcpredict.daemon.store import PredictionRow
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

ROOT, NOBODY = 0, 65534     # the hooks (SlurmUser root here) and an ordinary user: the attacker "nobody"
BOB_SCRIPT = b"#!/bin/sh\n#HPCPREDICT size=64\nsrun ./lmp -in in.melt\n"


@pytest.fixture
def service(world_dir):
    config = load_config(None, environ={"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(world_dir), "HPCPREDICT_DAEMON_METRICS": "",
                                        "HPCPREDICT_DAEMON_HOOK_SOCKET": "", "HOME": str(world_dir)})
    daemon = Daemon(config)
    daemon.service.reload()
    yield daemon.service
    daemon.store.close()


def bob_request(**changes) -> pb.JobRequest:
    request = pb.JobRequest(job=pb.JobIdentity(user="bob", account="research", partition="debug", job_name="melt"),
                            resources=pb.Resources(nodes=2, ntasks=8), time_limit_s=3600, script=BOB_SCRIPT)
    for key, value in changes.items():
        setattr(request, key, value)
    return request


def attacker_request() -> pb.JobRequest:
    """What the epilog sends for the attacker's job: her identity from slurmctld's environment."""
    return pb.JobRequest(job=pb.JobIdentity(user="nobody", account="research", partition="debug",
                                            job_name="x AdminComment={hpcpredict=...}"),
                         resources=pb.Resources(nodes=1, ntasks=1), time_limit_s=60)


def seed_bob(service, runtimes=(1700.0, 1740.0, 1720.0, 1690.0, 1730.0)) -> None:
    for index, runtime in enumerate(runtimes):
        assert service.call("ReportOutcome", pb.Outcome(
            job_id=f"bob-{index}", state="COMPLETED", elapsed_s=runtime, start_time=1_700_000_000 + index * 4000,
            end_time=1_700_000_000 + index * 4000 + int(runtime), request=bob_request()), ROOT).stored


def rows(service, job_id: str) -> list[dict]:
    return [row for row in service.store.job_rows(job_id) if row["source"] == "outcome"]


def test_a_forged_prediction_id_links_nothing_and_leaves_bobs_limits_alone(service):
    """Finding 1, daemon side: 21 one-second jobs whose outcomes name bob's prediction id (read
    from a job name like ``x AdminComment={hpcpredict=<bob's id>}``) are the attacker's, linked
    to nothing; bob's history and his suggested limit are unchanged."""
    seed_bob(service)
    bobs = service.call("Predict", bob_request(), ROOT)
    before = service.call("Predict", bob_request(), ROOT).suggested_time_limit_s
    for index in range(21):
        outcome = pb.Outcome(job_id=f"{1000 + index}", prediction_id=bobs.prediction_id, state="COMPLETED",
                             elapsed_s=1 + index % 3, start_time=1_700_100_000 + index * 10,
                             end_time=1_700_100_000 + index * 10 + 1 + index % 3, request=attacker_request())
        assert service.call("ReportOutcome", outcome, ROOT).stored
    stored = rows(service, "1000")
    assert len(stored) == 1 and stored[0]["user"] == "nobody" and stored[0]["prediction_id"] == ""
    assert stored[0]["application"] != "lmp" and stored[0]["job_name"].startswith("x AdminComment=")
    assert sum(1 for job in service.store.iter_jobs() if job.user == "bob") == 5
    assert service.call("Predict", bob_request(), ROOT).suggested_time_limit_s == before


def test_the_prolog_never_predicts_from_another_users_stored_request(service):
    """Finding 1, prolog side: an allocation naming the job's user and bob's prediction id is
    predicted from the job's own request (never bob's application, history or explanation)."""
    seed_bob(service)
    bobs = service.call("Predict", bob_request(), ROOT)
    allocation = service.call("PredictAtAllocation", pb.AllocationRequest(
        request=attacker_request(), node_list="n01", job_id="77", prediction_id=bobs.prediction_id), ROOT)
    row = service.store.prediction(allocation.prediction_id)
    assert row.user == "nobody" and row.application != "lmp" and row.job_id == "77"
    assert not any("lmp" in line or "bob" in line for line in allocation.explanation)


def test_a_users_predict_under_bobs_job_id_never_links_or_feeds_bobs_outcome(service):
    """Finding 2: an ordinary user's Predict naming bob's job id (with her inputs) is kept under
    no job id; bob's outcome, arriving without a prediction id, links bob's own allocation
    prediction, and her inputs stay out of his training row."""
    bob_alloc = service.call("PredictAtAllocation", pb.AllocationRequest(
        request=bob_request(job_id="202"), node_list="n[01-02]", job_id="202"), ROOT)
    hers = pb.JobRequest(job=pb.JobIdentity(user="nobody", application="lmp"), time_limit_s=60, job_id="202")
    hers.inputs["size"].number = 999.0
    mine = service.call("Predict", hers, NOBODY)
    assert service.store.prediction(mine.prediction_id).job_id == ""
    outcome = pb.Outcome(job_id="202", state="COMPLETED", elapsed_s=1700, start_time=1_700_200_000,
                         end_time=1_700_201_700, request=bob_request(job_id="202"))
    assert service.call("ReportOutcome", outcome, ROOT).stored
    [row] = rows(service, "202")
    assert row["user"] == "bob" and row["prediction_id"] == bob_alloc.prediction_id
    assert "999" not in row["inputs"]


def test_another_users_row_under_the_job_id_is_not_linked(service):
    """A row already stored under bob's job id by someone else (written before ordinary users'
    job ids were dropped, or by a site tool) is not bob's: his outcome links nothing."""
    service.store.record_prediction(PredictionRow(
        prediction_id="eve-0", job_id="303", stage="submit", user="eve", application="lmp", created=1_700_300_000.0,
        runtime_s=5.0, low_s=1.0, high_s=9.0, bound_s=10.0, requested_time_s=60.0, comm_time_s=None,
        model_name="x", model_version="1", fallback=False,
        request=pb.JobRequest(job=pb.JobIdentity(user="eve"), inputs={"size": pb.Value(number=999.0)}).SerializeToString()))
    outcome = pb.Outcome(job_id="303", state="COMPLETED", elapsed_s=1700, start_time=1_700_300_010,
                         end_time=1_700_301_710, submit_time=1_700_299_000, request=bob_request(job_id="303"))
    assert service.call("ReportOutcome", outcome, ROOT).stored
    [row] = rows(service, "303")
    assert row["user"] == "bob" and row["prediction_id"] == "" and "999" not in row["inputs"]


def test_a_prediction_of_another_job_is_not_linked(service):
    """bob's own allocation prediction of job 404 does not describe his job 405."""
    other = service.call("PredictAtAllocation", pb.AllocationRequest(
        request=bob_request(job_id="404"), node_list="n01", job_id="404"), ROOT)
    outcome = pb.Outcome(job_id="405", prediction_id=other.prediction_id, state="COMPLETED", elapsed_s=100,
                         start_time=1_700_400_000, end_time=1_700_400_100, request=bob_request(job_id="405"))
    assert service.call("ReportOutcome", outcome, ROOT).stored
    assert rows(service, "405")[0]["prediction_id"] == ""


def test_bobs_own_prediction_links_his_outcome_and_describes_it(service):
    """The ordinary case: the id bob's job carries is bob's; his outcome is linked to it and
    described by its stored request (the script: application lmp, its #HPCPREDICT input)."""
    bobs = service.call("Predict", bob_request(), ROOT)
    slurm_view = pb.JobRequest(job=pb.JobIdentity(user="bob", account="research", partition="debug",
                                                  job_name="melt"), resources=pb.Resources(nodes=2), time_limit_s=3600)
    outcome = pb.Outcome(job_id="505", prediction_id=bobs.prediction_id, state="COMPLETED", elapsed_s=1700,
                         start_time=1_700_500_000, end_time=1_700_501_700, request=slurm_view)
    assert service.call("ReportOutcome", outcome, ROOT).stored
    [row] = rows(service, "505")
    assert row["user"] == "bob" and row["prediction_id"] == bobs.prediction_id and row["application"] == "lmp"
    assert '"size": 64' in row["inputs"]


def test_a_users_predict_under_bobs_job_id_never_reaches_his_runtime_features(service):
    """Finding 2 through the runtime-features relay: bob's AdminComment was rewritten, so the
    epilog relays his features file and his outcome with no prediction id. The features are
    predicted from bob's own allocation request and his training row gets his features, never
    the inputs of the user who predicted under his job id."""
    bob_alloc = service.call("PredictAtAllocation", pb.AllocationRequest(
        request=bob_request(job_id="606"), node_list="n01", job_id="606"), ROOT)
    hers = pb.JobRequest(job=pb.JobIdentity(user="nobody", application="lmp"), time_limit_s=60, job_id="606")
    hers.inputs["size"].number = 999.0
    service.call("Predict", hers, NOBODY)
    relayed = service.call("ReportRuntimeFeatures", pb.RuntimeFeatures(job_id="606", text="HPCPREDICT t=5 steps=10\n"),
                           ROOT)
    assert service.store.prediction(relayed.prediction_id).user == "bob"
    outcome = pb.Outcome(job_id="606", state="COMPLETED", elapsed_s=1700, start_time=1_700_600_000,
                         end_time=1_700_601_700, request=bob_request(job_id="606"))
    assert service.call("ReportOutcome", outcome, ROOT).stored
    [row] = rows(service, "606")
    assert row["user"] == "bob" and row["prediction_id"] in (bob_alloc.prediction_id, relayed.prediction_id)
    assert '"steps": 10' in row["inputs"] and "999" not in row["inputs"]
