"""Hostile requests against the running daemon: refused with INVALID_ARGUMENT, never INTERNAL."""
from __future__ import annotations

import grpc
import pytest
from hypothesis import HealthCheck, given, settings

from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from tests.fuzz.targets import all_targets
from tests.robustness.conftest import job, start

WIRE = next(t for t in all_targets() if t.name == "jobspec.wire_bytes").strategy


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import os
    data_dir = tmp_path_factory.mktemp("hostile")
    os.chmod(data_dir, 0o755)
    daemon, client = start(data_dir)
    yield daemon, client
    client.close()
    daemon.stop()


SHORT_BUT_HUGE = [
    ("Predict", pb.JobRequest(job=pb.JobIdentity(user="a"), node_list="n[0-99999999]"), "node_list"),
    ("Predict", pb.JobRequest(job=pb.JobIdentity(user="a"), resources=pb.Resources(tasks_per_node="1(x2000000000)")),
     "tasks_per_node"),
    ("PredictAtAllocation", pb.AllocationRequest(request=job(), job_id="1", node_list="n[0-9999999999]"), "node_list"),
    ("PredictAtAllocation", pb.AllocationRequest(request=job(), job_id="1", node_list="n[0-1]",
                                                 tasks_per_node="4(x99999999999)"), "tasks_per_node"),
]


@pytest.mark.parametrize("method,message,field", SHORT_BUT_HUGE, ids=[f"{m}-{f}" for m, _, f in SHORT_BUT_HUGE])
def test_short_requests_naming_huge_allocations_are_refused(served, method, message, field):
    _, client = served
    with pytest.raises(grpc.RpcError) as caught:
        getattr(client.stub, method)(message, timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith(field)


def test_fuzzed_wire_bytes_never_break_the_daemon(served):
    daemon, client = served
    channel = grpc.insecure_channel(f"unix:{daemon.socket}")
    raw = channel.unary_unary("/hpcpredict.v1.Predictor/Predict", request_serializer=None,
                              response_deserializer=pb.Estimate.FromString)
    codes: dict[str, int] = {}

    @settings(max_examples=150, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(WIRE)
    def call(payload):
        try:
            raw(payload, timeout=10)
            code = "OK"
        except grpc.RpcError as error:
            code = error.code().name
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, (error.code(), error.details(), payload[:80])
            assert error.details().strip()
        codes[code] = codes.get(code, 0) + 1

    try:
        call()
    finally:
        channel.close()
    assert codes.get("OK", 0) and codes.get("INVALID_ARGUMENT", 0), codes
    assert client.stub.Predict(job(), timeout=10).runtime_s > 0
    assert daemon.proc.poll() is None
