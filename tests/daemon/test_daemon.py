"""The real daemon on a real Unix socket, called through the generated client."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from hpcpredict.daemon.client import DaemonClient
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from hpcpredict.proto.v1 import hpcpredict_pb2_grpc as pb_grpc


def job(user="alice", app="lmp", time_limit_s=7200, **resources):
    return pb.JobRequest(job=pb.JobIdentity(user=user, application=app, job_name="run"),
                         resources=pb.Resources(nodes=resources.get("nodes", 2), ntasks=resources.get("ntasks", 8)),
                         time_limit_s=time_limit_s)


@pytest.fixture
def stub(daemon):
    channel = grpc.insecure_channel(f"unix:{daemon.socket}")
    yield pb_grpc.PredictorStub(channel)
    channel.close()


@pytest.fixture
def admin_stub(stub):
    return stub   # the gRPC socket admits trusted tools only (here root), who act as the daemon


def test_predict_then_outcome_uses_history(stub):
    first = stub.Predict(job(), timeout=5)
    assert first.fallback
    assert first.prediction_id
    assert first.runtime_s == pytest.approx(7200)  # no history: the user's own request answers
    for number, elapsed in enumerate((1800.0, 2400.0, 3000.0)):
        ack = stub.ReportOutcome(pb.Outcome(job_id=f"10{number}", elapsed_s=elapsed, state="COMPLETED",
                                            end_time=1_700_000_000 + number, request=job()), timeout=5)
        assert ack.stored and not ack.duplicate
    again = stub.Predict(job(), timeout=5)
    assert not again.fallback
    assert again.runtime_s == pytest.approx((2400.0 + 3000.0) / 2)  # Tsafrir: mean of the last two
    assert any("last 3 runs of lmp" in line for line in again.explanation)
    assert again.suggested_time_limit_s >= again.runtime_s
    # [policy] mode = auto (the default) without a controller running time_min_as_soft_limit:
    # advice only, and the line says so
    assert (again.policy_mode, again.apply_time_min_s, again.apply_time_limit_s) == ("advise", 0, 0)
    assert "advice only" in again.user_message and again.user_message.startswith("predicted runtime")
    other_user = stub.Predict(job(user="bob"), timeout=5)
    assert other_user.fallback


def test_outcome_is_idempotent_and_linked_to_prediction(stub):
    estimate = stub.Predict(job(user="carol"), timeout=5)
    outcome = pb.Outcome(job_id="77", prediction_id=estimate.prediction_id, elapsed_s=600, state="COMPLETED",
                         end_time=1_700_000_000)
    assert not stub.ReportOutcome(outcome, timeout=5).duplicate
    assert stub.ReportOutcome(outcome, timeout=5).duplicate
    # the stored request of the prediction tells who ran it: carol now has history
    assert not stub.Predict(job(user="carol"), timeout=5).fallback


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _raw_call(daemon, payload: bytes):
    with grpc.insecure_channel(f"unix:{daemon.socket}") as channel:
        call = channel.unary_unary("/hpcpredict.v1.Predictor/Predict", request_serializer=None,
                                   response_deserializer=pb.Estimate.FromString)
        return call(payload, timeout=5)


BAD_REQUESTS = [
    ("missing user", pb.JobRequest(resources=pb.Resources(nodes=1)), "job.user"),
    ("absurd nodes", pb.JobRequest(job=pb.JobIdentity(user="a"), resources=pb.Resources(nodes=10_000_000)),
     "resources.nodes"),
    ("tasks below nodes", pb.JobRequest(job=pb.JobIdentity(user="a"), resources=pb.Resources(nodes=8, ntasks=2)),
     "resources.ntasks"),
    ("10 MB script", pb.JobRequest(job=pb.JobIdentity(user="a"), script=b"#!/bin/sh\n" + b"x" * (10 << 20)),
     "script"),
    ("risk out of range", pb.JobRequest(job=pb.JobIdentity(user="a"), risk=1.5), "risk"),
    ("unknown pattern", pb.JobRequest(job=pb.JobIdentity(user="a"), comm=pb.CommPattern(name="ring", message_bytes=8)),
     "comm.name"),
    ("time limit of years", pb.JobRequest(job=pb.JobIdentity(user="a"), time_limit_s=4_000_000_000), "time_limit_s"),
]


@pytest.mark.parametrize("name,request_message,field", BAD_REQUESTS, ids=[b[0] for b in BAD_REQUESTS])
def test_bad_requests_are_invalid_argument_naming_the_field(stub, name, request_message, field):
    with pytest.raises(grpc.RpcError) as caught:
        stub.Predict(request_message, timeout=10)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith(field)
    assert stub.Predict(job(), timeout=5).runtime_s > 0  # still serving


def test_negative_node_count_on_the_wire(daemon, stub):
    user = pb.JobIdentity(user="a").SerializeToString()
    resources = b"\x08" + _varint(-1)  # field 1 (nodes), varint -1 as a signed client would send it
    payload = b"\x0a" + _varint(len(user)) + user + b"\x1a" + _varint(len(resources)) + resources
    with pytest.raises(grpc.RpcError) as caught:
        _raw_call(daemon, payload)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "resources.nodes" in caught.value.details()


def test_non_utf8_text_names_the_field(daemon, stub):
    identity = b"\x0a\x05al\xffce"  # JobIdentity.user with invalid UTF-8
    payload = b"\x0a" + _varint(len(identity)) + identity
    with pytest.raises(grpc.RpcError) as caught:
        _raw_call(daemon, payload)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith("job.user")
    # a job *script* in Latin-1 is a real case: it is accepted, decoded with replacement
    latin1 = pb.JobRequest(job=pb.JobIdentity(user="a"), script="#!/bin/sh\n# r\xe9sum\xe9\nsrun ./x\n".encode("latin-1"))
    assert stub.Predict(latin1, timeout=5).runtime_s > 0


def test_health_reflection_metrics(daemon, stub):
    with grpc.insecure_channel(f"unix:{daemon.socket}") as channel:
        health = health_pb2_grpc.HealthStub(channel)
        for service in ("", "hpcpredict.v1.Predictor"):
            reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        answers = reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]),
                                                  timeout=5)
        names = {s.name for answer in answers for s in answer.list_services_response.service}
    assert "hpcpredict.v1.Predictor" in names
    stub.Predict(job(), timeout=5)
    text = urllib.request.urlopen(f"http://127.0.0.1:{daemon.info['metrics_port']}/metrics", timeout=5).read().decode()
    assert 'hpcpredict_requests_total{code="OK",method="Predict"}' in text
    assert "hpcpredict_request_seconds_bucket" in text


def test_grpc_socket_admits_only_trusted_tools_and_users_ask_on_the_local_socket(daemon, stub):
    assert os.getuid() == 0, "the test suite runs as root (CI does)"
    assert oct(os.stat(daemon.socket).st_mode & 0o777) == "0o600"
    assert stub.GetStatus(pb.StatusRequest(), timeout=5).version   # root: a trusted tool
    script = textwrap.dedent(f"""
        import grpc, sys
        from hpcpredict.daemon.client import DaemonClient
        from hpcpredict.daemon.errors import HpcPredictError
        from hpcpredict.proto.v1 import hpcpredict_pb2 as pb, hpcpredict_pb2_grpc as g
        stub = g.PredictorStub(grpc.insecure_channel("unix:{daemon.socket}"))
        try:
            stub.Predict(pb.JobRequest(job=pb.JobIdentity(user="nobody")), timeout=5)
            print("OK")
        except grpc.RpcError as e:
            print(e.code().name)
        client = DaemonClient("{daemon.hook_socket}")
        try:
            client.call("ReloadModels", pb.ReloadRequest())
        except HpcPredictError as e:
            print("denied" if "permission denied" in str(e) else e)
        print(client.predict(pb.JobRequest(job=pb.JobIdentity(user="nobody"))).runtime_s > 0)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                            user="nobody", env={**os.environ, "HOME": "/tmp"})
    assert result.stdout.split() == ["UNAVAILABLE", "denied", "True"], result.stderr


def test_corrupt_model_is_refused_and_the_old_one_keeps_serving(daemon, admin_stub, tmp_path):
    from hpcpredict.daemon.registry import CURRENT, ModelRegistry
    from hpcpredict.topology.placement import Placement

    placement = Placement(kind="tree", levels=("level1",), paths={"n1": ("s1",), "n2": ("s1",)})
    folder = tmp_path / "topo"
    folder.mkdir()
    placement.save(folder / "topology.json")
    registry = ModelRegistry(daemon.data_dir / "models")
    good = registry.publish("topology", folder)
    reply = admin_stub.ReloadModels(pb.ReloadRequest(), timeout=30)
    assert [m.version for m in reply.models if m.kind == "topology"] == [good.version]
    # a version whose file no longer matches its checksum becomes CURRENT behind the daemon's back
    bad = registry.publish("topology", folder)
    (bad.model_path / "topology.json").write_text('{"kind": "tree", "levels": [], "nodes": {"n1": ')
    reply = admin_stub.ReloadModels(pb.ReloadRequest(), timeout=30)
    assert any("checksum mismatch" in error for error in reply.errors)
    assert [m.version for m in reply.models if m.kind == "topology"] == [good.version]  # still serving
    # the refused artifact is reported, and the daemon keeps answering
    status = admin_stub.GetStatus(pb.StatusRequest(), timeout=5)
    assert any("checksum" in fault for fault in status.faults)
    # a folder that is not an artifact at all cannot be published
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "topology.json").write_text("not json")
    from hpcpredict.daemon.errors import ModelArtifactError
    with pytest.raises(ModelArtifactError):
        registry.publish("topology", junk)
    assert (registry.root / "topology" / "_site" / CURRENT).read_text().strip() == bad.version


def test_daemon_runs_unprivileged_and_root_is_still_admin(world_dir):
    """The daemon as `nobody`: it serves, writes its store, and root may still administer it."""
    import pwd

    from tests.daemon.daemonproc import DaemonProcess

    nobody = pwd.getpwnam("nobody")
    data = world_dir / "state"
    data.mkdir()
    os.chown(data, nobody.pw_uid, nobody.pw_gid)
    process = DaemonProcess(data, user="nobody", env={"HOME": str(data)}).start()
    try:
        with open(f"/proc/{process.info['pid']}/status") as status:
            uids = next(line for line in status if line.startswith("Uid:")).split()[1:]
        assert set(uids) == {str(nobody.pw_uid)}  # real, effective, saved, filesystem
        with grpc.insecure_channel(f"unix:{process.socket}") as channel:
            assert pb_grpc.PredictorStub(channel).Predict(job(), timeout=5).prediction_id
        assert os.stat(data / "hpcpredict.sqlite").st_uid == nobody.pw_uid
        status = DaemonClient(process.hook_socket).call("GetStatus", pb.StatusRequest())   # root, by SO_PEERCRED
        assert status.predictions == 1
    finally:
        process.stop()
