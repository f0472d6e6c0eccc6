"""The transport-free PredictionService, called directly: values in, values or our errors out."""
from __future__ import annotations

import os

import pytest

from hpcpredict.daemon.config import load_config
from hpcpredict.daemon.errors import InvalidRequest, PermissionDenied
from hpcpredict.daemon.server import Daemon
from hpcpredict.daemon.service import error_message, status_name
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb


@pytest.fixture
def service(world_dir):
    config = load_config(None, environ={"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(world_dir), "HPCPREDICT_DAEMON_METRICS": "",
                                        "HPCPREDICT_DAEMON_HOOK_SOCKET": "", "HOME": str(world_dir)})
    daemon = Daemon(config)   # built, not started: no socket answers
    daemon.service.reload()
    yield daemon.service
    daemon.store.close()


def test_predict_and_outcome_without_any_transport(service):
    request = pb.JobRequest(job=pb.JobIdentity(user="ann", application="lmp"),
                            resources=pb.Resources(nodes=1, ntasks=4), time_limit_s=3600)
    estimate = service.call("Predict", request, 0)
    assert isinstance(estimate, pb.Estimate) and estimate.prediction_id and estimate.runtime_s > 0
    ack = service.call("ReportOutcome", pb.Outcome(job_id="1", prediction_id=estimate.prediction_id,
                                                   elapsed_s=600, state="COMPLETED", end_time=1_700_000_000), 0)
    assert ack.stored and not ack.duplicate


def test_our_errors_come_out_and_map_to_one_status_each(service):
    with pytest.raises(InvalidRequest) as bad:
        service.call("Predict", pb.JobRequest(), 0)
    assert status_name(bad.value) == "INVALID_ARGUMENT" and error_message("Predict", bad.value).startswith("job.user")
    for caller in (None, 65534):   # unknown, or not an admin
        with pytest.raises(PermissionDenied) as denied:
            service.call("GetStatus", pb.StatusRequest(), caller)
        assert status_name(denied.value) == "PERMISSION_DENIED"
    status = service.call("GetStatus", pb.StatusRequest(), os.getuid())   # the daemon's own user is an admin
    assert status.requests == 3 and status.predictions == 0 and not status.faults   # the three calls before
    assert status_name(ZeroDivisionError()) == "INTERNAL"
    assert error_message("Predict", ZeroDivisionError("secret detail")) == "internal error in Predict: ZeroDivisionError"


def test_outcome_of_a_job_submitted_without_nodes_keeps_the_allocated_count(service):
    """sbatch without -N: the submission asks with nodes=0; the history must learn the count
    Slurm allocated (from the outcome's node list), not 0."""
    estimate = service.call("Predict", pb.JobRequest(job=pb.JobIdentity(user="ann"), resources=pb.Resources(ntasks=4),
                                                      time_limit_s=3600), 0)
    service.call("ReportOutcome", pb.Outcome(job_id="7", prediction_id=estimate.prediction_id, elapsed_s=60,
                                             state="COMPLETED", end_time=1_700_000_000, node_list="n[01-03]"), 0)
    given = service.call("Predict", pb.JobRequest(job=pb.JobIdentity(user="bo"), resources=pb.Resources(nodes=2),
                                                   time_limit_s=3600), 0)
    service.call("ReportOutcome", pb.Outcome(job_id="8", prediction_id=given.prediction_id, elapsed_s=60,
                                             state="COMPLETED", end_time=1_700_000_001, node_list="n[01-03]"), 0)
    nodes = {job.job_id: job.nodes for job in service.store.iter_jobs()}
    assert nodes == {"7": 3, "8": 2}     # -N given: the request's count stays


def test_stored_prediction_names_the_published_model_that_made_it(service):
    """A prediction answered by a published model is stored with that artifact's kind, key and
    registry version (not a constant "1"), so it can be traced to the model that made it; one
    answered by a rule (the user's request) keeps the rule's name."""
    served = {info.kind: info for info in service.call("ListModels", pb.ListModelsRequest(), os.getuid()).models}
    runtime = served["runtime"]                   # the bundled LAMMPS runtime model
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "contrib" / "examples" / "lammps-job.sh"
    request = pb.JobRequest(job=pb.JobIdentity(user="ann"), resources=pb.Resources(nodes=4, ntasks=64),
                            time_limit_s=14400, script=script.read_bytes())
    estimate = service.call("Predict", request, 0)
    assert not estimate.fallback, list(estimate.explanation)
    assert estimate.model_version == runtime.version
    assert estimate.model_name.endswith(f"[runtime/{runtime.key}]")
    row = poll_row(service, estimate.prediction_id)
    assert (row.model_name, row.model_version) == (estimate.model_name, runtime.version)
    rule = service.call("Predict", pb.JobRequest(job=pb.JobIdentity(user="new"), time_limit_s=3600), 0)
    assert rule.fallback and "[" not in rule.model_name


def poll_row(service, prediction_id):
    import time

    deadline = time.monotonic() + 10
    while (row := service.store.prediction(prediction_id)) is None:
        assert time.monotonic() < deadline, "prediction never reached the store"
        time.sleep(0.05)
    return row


NOBODY = 65534   # an ordinary user (tests run as root)


def test_an_ordinary_user_predicts_only_about_their_own_jobs(service):
    other = pb.JobRequest(job=pb.JobIdentity(user="bob", application="lmp"), time_limit_s=3600)
    with pytest.raises(PermissionDenied, match=r"job.user: you \(nobody\) may only ask about your own jobs"):
        service.call("Predict", other, NOBODY)
    unnamed = pb.JobRequest(job=pb.JobIdentity(application="lmp"), time_limit_s=3600)
    assert service.call("Predict", unnamed, NOBODY).runtime_s > 0
    assert unnamed.job.user == "nobody"          # asked as the caller, never as someone else
    assert service.call("Predict", pb.JobRequest(job=pb.JobIdentity(user="nobody")), NOBODY).runtime_s > 0
    assert service.call("Predict", other, 0).runtime_s > 0    # root (the submit hook's slurmctld) may


@pytest.mark.parametrize("method, request_message", [
    ("ReportOutcome", pb.Outcome(job_id="7", state="COMPLETED", elapsed_s=60,
                                 request=pb.JobRequest(job=pb.JobIdentity(user="nobody")))),
    ("PredictAtAllocation", pb.AllocationRequest(node_list="n1", request=pb.JobRequest(job=pb.JobIdentity(user="nobody")))),
    ("ReportRuntimeFeatures", pb.RuntimeFeatures(prediction_id="x")),
    ("ReloadModels", pb.ReloadRequest()), ("ListModels", pb.ListModelsRequest()), ("GetStatus", pb.StatusRequest()),
])
def test_history_writes_and_admin_calls_are_refused_to_an_ordinary_user(service, method, request_message):
    with pytest.raises(PermissionDenied):
        service.call(method, request_message, NOBODY)


def test_the_slurm_user_writes_history_but_is_no_admin(world_dir):
    config = load_config(None, environ={"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(world_dir), "HPCPREDICT_DAEMON_METRICS": "",
                                        "HPCPREDICT_DAEMON_HOOK_SOCKET": "", "HOME": str(world_dir),
                                        "HPCPREDICT_DAEMON_SLURM_USER": "nobody"})
    daemon = Daemon(config)
    try:
        daemon.service.reload()
        ack = daemon.service.call("ReportOutcome", pb.Outcome(
            job_id="8", state="COMPLETED", elapsed_s=60, end_time=1_700_000_000,
            request=pb.JobRequest(job=pb.JobIdentity(user="bob", application="lmp"))), NOBODY)
        assert ack.stored
        assert daemon.service.call("Predict", pb.JobRequest(job=pb.JobIdentity(user="bob")), NOBODY).runtime_s > 0
        with pytest.raises(PermissionDenied, match="admin call"):
            daemon.service.call("GetStatus", pb.StatusRequest(), NOBODY)
    finally:
        daemon.store.close()
