"""The daemon's gRPC server (grpcio's thread-pool server) on a real Unix socket.

Calls are held the way they are held in production: a store whose write lock another process
holds (as a stuck writer or a slow disk would) keeps ReportOutcome calls waiting inside the
daemon. With them the tests see the concurrency limit refuse at once, health at the limit,
Watch following the drain on SIGTERM, and held calls finishing within the grace period.
"""
from __future__ import annotations

import signal
import sqlite3
import time
import urllib.request
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from hpcpredict.proto.v1 import hpcpredict_pb2_grpc as pb_grpc
from tests.daemon.daemonproc import DaemonProcess

LIMIT = 4


def job(user: str = "ann") -> pb.JobRequest:
    return pb.JobRequest(job=pb.JobIdentity(user=user, application="lmp"),
                         resources=pb.Resources(nodes=1, ntasks=4), time_limit_s=3600)


def outcome(job_id: str) -> pb.Outcome:
    return pb.Outcome(job_id=job_id, elapsed_s=600, state="COMPLETED", end_time=1_700_000_000, request=job())


@pytest.fixture(params=[10.0])
def limited(world_dir, request):
    """A daemon with room for LIMIT calls, and a connection that can take its store's write lock."""
    daemon = DaemonProcess(world_dir, env={"HPCPREDICT_DAEMON_MAX_CONCURRENT": str(LIMIT),
                                           "HPCPREDICT_DAEMON_WORKERS": "2",
                                           "HPCPREDICT_DAEMON_HOOK_SOCKET": "",
                                           "HPCPREDICT_DAEMON_GRACE_S": str(request.param),
                                           "HPCPREDICT_STORE_BUSY_TIMEOUT_MS": "30000"}).start()
    blocker = sqlite3.connect(world_dir / "hpcpredict.sqlite", isolation_level=None)
    channel = grpc.insecure_channel(f"unix:{daemon.socket}")
    yield daemon, blocker, channel
    if blocker.in_transaction:
        blocker.execute("ROLLBACK")
    blocker.close()
    channel.close()
    daemon.stop()


def _hold(stub, count: int) -> list:
    return [stub.ReportOutcome.future(outcome(f"held-{n}"), timeout=60) for n in range(count)]


def test_past_the_concurrency_limit_calls_are_refused_at_once(limited):
    daemon, blocker, channel = limited
    stub = pb_grpc.PredictorStub(channel)
    assert stub.Predict(job(), timeout=10).runtime_s > 0
    blocker.execute("BEGIN IMMEDIATE")
    held = _hold(stub, LIMIT)
    time.sleep(1.0)   # let all of them reach the daemon
    with pytest.raises(grpc.RpcError) as refused:
        stub.Predict(job(), timeout=10)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert not any(call.done() for call in held)   # refusing did not wait for them
    # A health probe takes a place like any call, so at the limit it is refused at once too
    # (never left hanging): a probe that sees RESOURCE_EXHAUSTED sees a live, full daemon.
    with pytest.raises(grpc.RpcError) as probe:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10)
    assert probe.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    blocker.execute("ROLLBACK")
    assert all(call.result(timeout=60).stored for call in held)
    assert stub.Predict(job(), timeout=10).runtime_s > 0
    assert health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=10).status == \
        health_pb2.HealthCheckResponse.SERVING


def test_watch_sees_the_drain_and_held_calls_finish_within_grace(limited):
    daemon, blocker, channel = limited
    stub = pb_grpc.PredictorStub(channel)
    health = health_pb2_grpc.HealthStub(channel)
    watch = health.Watch(health_pb2.HealthCheckRequest(service="hpcpredict.v1.Predictor"), timeout=60)
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    blocker.execute("BEGIN IMMEDIATE")
    held = _hold(stub, 2)
    time.sleep(0.5)   # let both reach the store
    daemon.proc.send_signal(signal.SIGTERM)
    assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING   # drain announced
    time.sleep(0.5)
    assert not any(call.done() for call in held)
    blocker.execute("ROLLBACK")
    assert [call.result(timeout=30).stored for call in held] == [True, True]
    watch.cancel()
    assert daemon.proc.wait(30) == 0


@pytest.mark.parametrize("limited", [0.5], indirect=True)
def test_after_grace_held_calls_are_cut_never_acknowledged(limited):
    daemon, blocker, channel = limited
    stub = pb_grpc.PredictorStub(channel)
    blocker.execute("BEGIN IMMEDIATE")
    held = stub.ReportOutcome.future(outcome("cut-1"), timeout=60)
    time.sleep(0.5)
    daemon.proc.send_signal(signal.SIGTERM)
    with pytest.raises(grpc.RpcError) as cut:
        held.result(timeout=30)
    assert cut.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)
    blocker.execute("ROLLBACK")   # the daemon's store can close now
    assert daemon.proc.wait(60) == 0


def test_every_caller_gets_its_own_answer_under_concurrency(daemon):
    with grpc.insecure_channel(f"unix:{daemon.socket}") as channel:
        stub = pb_grpc.PredictorStub(channel)

        def ask(n: int) -> str:
            request = pb.JobRequest(job=pb.JobIdentity(user=f"user{n % 7}", application=f"app-{n}"),
                                    resources=pb.Resources(nodes=1, ntasks=4), time_limit_s=600 + n)
            return stub.Predict(request, timeout=30).application
        with futures.ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(ask, range(300)))
    assert answers == [f"app-{n}" for n in range(300)]


def test_errors_keep_their_status_and_are_counted(daemon):
    with grpc.insecure_channel(f"unix:{daemon.socket}") as channel:
        stub = pb_grpc.PredictorStub(channel)
        with pytest.raises(grpc.RpcError) as bad:
            stub.Predict(pb.JobRequest(resources=pb.Resources(nodes=1)), timeout=10)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert bad.value.details().startswith("job.user")
        raw = channel.unary_unary("/hpcpredict.v1.Predictor/Predict", request_serializer=None,
                                  response_deserializer=None)
        with pytest.raises(grpc.RpcError) as undecodable:
            raw(b"\x0a\x05ab", timeout=10)   # truncated message
        assert undecodable.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert undecodable.value.details() == "request is not a valid hpcpredict.v1.JobRequest: malformed protobuf"
        with pytest.raises(grpc.RpcError) as not_utf8:
            raw(pb.JobRequest(job=pb.JobIdentity(application="ok")).SerializeToString()
                + b"\x0a\x04\x0a\x02\xff\xfe", timeout=10)   # job.user with bytes that are not UTF-8
        assert not_utf8.value.details() == "job.user: not valid UTF-8 text"
        with pytest.raises(grpc.RpcError) as unknown:
            channel.unary_unary("/hpcpredict.v1.Predictor/Missing", request_serializer=None,
                                response_deserializer=None)(b"", timeout=10)
        assert unknown.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert stub.Predict(job(), timeout=10).prediction_id   # still serving
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{daemon.info['metrics_port']}/metrics",
                                     timeout=10).read().decode()
    assert 'hpcpredict_requests_total{code="INVALID_ARGUMENT",method="Predict"} 1.0' in metrics
    assert 'hpcpredict_requests_total{code="OK",method="Predict"} 1.0' in metrics
