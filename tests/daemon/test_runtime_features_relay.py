"""ReportRuntimeFeatures with the raw lines of a job's features file (what the Slurm epilog
relays), and the outcome that takes the reported values into the job's history."""
from __future__ import annotations

import pytest

from hpcpredict.daemon.config import load_config
from hpcpredict.daemon.errors import InvalidRequest
from hpcpredict.daemon.server import Daemon
from hpcpredict.daemon.service import MAX_FEATURES_TEXT_CHARS
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

SLURM = 0   # root: the Slurm user of a site whose SlurmUser is root


@pytest.fixture
def daemon(world_dir):
    config = load_config(None, environ={"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(world_dir), "HPCPREDICT_DAEMON_METRICS": "",
                                        "HPCPREDICT_DAEMON_HOOK_SOCKET": "", "HOME": str(world_dir)})
    built = Daemon(config)   # built, not started: the service is called directly
    built.service.reload()
    yield built
    built.store.close()


def allocate(service, job_id: str) -> pb.Estimate:
    request = pb.JobRequest(job=pb.JobIdentity(user="ann", application="solver"),
                            resources=pb.Resources(nodes=1, ntasks=4), time_limit_s=3600,
                            inputs={"size": pb.Value(number=64)})
    return service.call("PredictAtAllocation", pb.AllocationRequest(request=request, node_list="n1", job_id=job_id),
                        SLURM)


def outcome(service, job_id: str, prediction_id: str) -> None:
    ack = service.call("ReportOutcome", pb.Outcome(job_id=job_id, prediction_id=prediction_id, state="COMPLETED",
                                                   submit_time=1, start_time=1_700_000_000,
                                                   end_time=1_700_000_600, elapsed_s=600), SLURM)
    assert ack.stored and not ack.duplicate


def stored_inputs(store, job_id: str) -> dict:
    store.flush()
    return next(record.inputs for record in store.jobs_by_submit() if record.job_id == job_id)


def test_raw_lines_are_parsed_and_the_outcome_keeps_values_and_report_times(daemon):
    service, store = daemon.service, daemon.store
    allocated = allocate(service, "101")
    text = ("HPCPREDICT t=3.5 iterations=400 solver=cg\n"
            "some output the application also wrote\n"
            "HPCPREDICT t=9 iterations=800 converged=true\n"
            "HPCPREDICT t=oops broken=1\n"
            "HPCPREDICT t=10 bad-pair-without-equals spoof@t=1\n")
    relayed = pb.RuntimeFeatures(job_id="101", prediction_id=allocated.prediction_id, text=text)
    refined = service.call("ReportRuntimeFeatures", relayed, SLURM)
    assert refined.prediction_id and refined.prediction_id != allocated.prediction_id
    store.flush()
    assert store.prediction(refined.prediction_id).stage == "runtime-features"

    outcome(service, "101", allocated.prediction_id)
    inputs = stored_inputs(store, "101")
    # the last value of each key, and when it was reported; a spoofed report time is ignored
    assert inputs["iterations"] == 800.0 and inputs["iterations@t"] == 9.0
    assert inputs["solver"] == "cg" and inputs["solver@t"] == 3.5
    assert inputs["converged"] is True and inputs["size"] == 64.0
    assert "broken" not in inputs and "spoof" not in inputs and "spoof@t" not in inputs


def test_the_job_id_alone_finds_the_jobs_prediction(daemon):
    service, store = daemon.service, daemon.store
    allocate(service, "102")
    refined = service.call("ReportRuntimeFeatures", pb.RuntimeFeatures(job_id="102", text="HPCPREDICT t=1 n=5\n"),
                           SLURM)
    store.flush()
    assert store.prediction(refined.prediction_id).job_id == "102"
    with pytest.raises(InvalidRequest, match="no prediction of job '999' is stored"):
        service.call("ReportRuntimeFeatures", pb.RuntimeFeatures(job_id="999", text="HPCPREDICT t=1 n=5\n"), SLURM)


def test_an_outcome_without_reported_features_is_unchanged(daemon):
    service, store = daemon.service, daemon.store
    allocated = allocate(service, "103")
    outcome(service, "103", allocated.prediction_id)
    assert stored_inputs(store, "103") == {"size": 64.0}


@pytest.mark.parametrize("request_message, field", [
    (pb.RuntimeFeatures(job_id="104", text="x" * (MAX_FEATURES_TEXT_CHARS + 1)), "text"),
    (pb.RuntimeFeatures(job_id="104", features=[pb.ReportedFeature(key="n@t", value=pb.Value(number=1))]),
     "features.key"),
])
def test_bad_requests_name_the_field(daemon, request_message, field):
    allocate(daemon.service, "104")
    with pytest.raises(InvalidRequest) as bad:
        daemon.service.call("ReportRuntimeFeatures", request_message, SLURM)
    assert bad.value.field == field
