"""The transport-free PredictionService, called directly: values in, values or our errors out."""
from __future__ import annotations

import os

import pytest

from hpcpredict.daemon.config import load_config
from hpcpredict.daemon.errors import InvalidRequest, PermissionDenied
from hpcpredict.daemon.server import create_daemon
from hpcpredict.daemon.service import error_message, status_name
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb


@pytest.fixture
def service(world_dir):
    config = load_config(None, environ={"HPCPREDICT_DATA_DIR": str(world_dir), "HPCPREDICT_DAEMON_METRICS": "",
                                        "HPCPREDICT_DAEMON_HOOK_SOCKET": "", "HOME": str(world_dir)})
    daemon = create_daemon(config)   # built, not started: no socket answers
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
    config = load_config(None, environ={"HPCPREDICT_DATA_DIR": str(world_dir), "HPCPREDICT_DAEMON_METRICS": "",
                                        "HPCPREDICT_DAEMON_HOOK_SOCKET": "", "HOME": str(world_dir),
                                        "HPCPREDICT_DAEMON_SLURM_USER": "nobody"})
    daemon = create_daemon(config)
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
