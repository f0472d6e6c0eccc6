"""The C++ gRPC front end (daemon/native/grpcfront.cpp) on a real Unix socket, and the daemon on
both server kinds.

The first tests drive ``NativeServer`` with a small bytes-in/bytes-out service, through real gRPC
Python clients, so each property of the front end is seen on its own: answers reach the caller
who asked (batches mix callers), errors keep their status, a failing handler costs one call,
the concurrency limit refuses at once (health checks excepted), streams answer in order, health
follows ``set_serving`` and is answered as gRPC's own service would,
and stopping drains or cancels what Python still holds.
"""
from __future__ import annotations

import os
import tempfile
import threading
import time
import urllib.request
from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from hpcpredict.daemon.native_server import NativeServer
from hpcpredict.daemon.server import admin_socket_path
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from hpcpredict.proto.v1 import hpcpredict_pb2_grpc as pb_grpc
from tests.daemon.daemonproc import DaemonProcess

ECHO, FAIL, BLOCK, STREAM = "/demo.Test/Echo", "/demo.Test/Fail", "/demo.Test/Block", "/demo.Test/Stream"
BAD_ENCODER = "/demo.Test/BadEncoder"


class Demo:
    def __init__(self):
        self.release = threading.Event()
        self.entered = threading.Semaphore(0)

    def echo(self, request: bytes, context) -> bytes:
        if request == b"abort":
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "asked to abort")
        return b"echo:" + request

    def fail(self, request: bytes, context) -> bytes:
        raise ZeroDivisionError("a bug in a handler")

    def block(self, request: bytes, context) -> bytes:
        self.entered.release()
        self.release.wait(10)
        return b"released"


@pytest.fixture
def served():
    directory = tempfile.mkdtemp(prefix="hpd-native-", dir="/tmp")
    socket_path = os.path.join(directory, "front.sock")
    demo = Demo()
    server = NativeServer(workers=2, max_concurrent=4, max_message_bytes=1 << 16)
    server.add_unary(ECHO, demo.echo, bytes, bytes)
    server.add_unary(FAIL, demo.fail, bytes, bytes)
    server.add_unary(BLOCK, demo.block, bytes, bytes)
    server.add_stream(STREAM, demo.echo, bytes, bytes)
    server.add_unary(BAD_ENCODER, demo.echo, bytes, lambda answer: answer.decode())  # returns str, not bytes
    server.add_insecure_port(f"unix:{socket_path}")
    server.start()
    channel = grpc.insecure_channel(f"unix:{socket_path}")
    yield server, demo, channel
    demo.release.set()
    channel.close()
    server.stop(0).wait(10)
    os.unlink(socket_path) if os.path.exists(socket_path) else None
    os.rmdir(directory)


def unary(channel, method):
    return channel.unary_unary(method, request_serializer=None, response_deserializer=None)


def test_every_caller_gets_its_own_answer_under_concurrency(served):
    _, _, channel = served
    echo = unary(channel, ECHO)
    payloads = [f"caller-{n}".encode() * (1 + n % 7) for n in range(400)]
    with futures.ThreadPoolExecutor(16) as pool:  # 16 callers > 4 places: retry refusals
        def call(payload):
            while True:
                try:
                    return echo(payload, timeout=10)
                except grpc.RpcError as error:
                    if error.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                        raise
        answers = list(pool.map(call, payloads))
    assert answers == [b"echo:" + payload for payload in payloads]


def test_errors_keep_their_status_and_a_failing_handler_costs_one_call(served):
    _, _, channel = served
    with pytest.raises(grpc.RpcError) as aborted:
        unary(channel, ECHO)(b"abort", timeout=5)
    assert aborted.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert aborted.value.details() == "asked to abort"
    for _ in range(3):  # more failures than dispatcher threads: none of them may die
        with pytest.raises(grpc.RpcError) as failed:
            unary(channel, FAIL)(b"x", timeout=5)
        assert failed.value.code() == grpc.StatusCode.UNKNOWN
        assert "ZeroDivisionError" in failed.value.details()
    for _ in range(3):
        with pytest.raises(grpc.RpcError) as unencodable:
            unary(channel, BAD_ENCODER)(b"x", timeout=5)
        assert unencodable.value.code() == grpc.StatusCode.UNKNOWN
    with pytest.raises(grpc.RpcError) as unknown:
        unary(channel, "/demo.Test/Missing")(b"x", timeout=5)
    assert unknown.value.code() == grpc.StatusCode.UNIMPLEMENTED
    assert unary(channel, ECHO)(b"still here", timeout=5) == b"echo:still here"


def test_oversized_request_is_refused_by_the_transport(served):
    _, _, channel = served
    with pytest.raises(grpc.RpcError) as refused:
        unary(channel, ECHO)(b"x" * (1 << 17), timeout=5)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_past_the_concurrency_limit_calls_are_refused_at_once(served):
    server, demo, channel = served
    block = unary(channel, BLOCK)
    held = [block.future(b"", timeout=20) for _ in range(4)]
    assert demo.entered.acquire(timeout=10)  # a dispatcher holds one; the others wait for Python
    deadline = time.monotonic() + 10
    while server.stats()["in_flight"] < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.stats()["in_flight"] == 4  # all four places are taken
    with pytest.raises(grpc.RpcError) as refused:
        unary(channel, ECHO)(b"one too many", timeout=5)
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert server.stats()["refused"] >= 1
    assert not any(call.done() for call in held)  # refusing did not wait for them
    # a probe still sees the daemon alive: health checks hold no place and are never refused
    assert health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
        health_pb2.HealthCheckResponse.SERVING
    demo.release.set()
    assert [call.result() for call in held] == [b"released"] * 4
    assert unary(channel, ECHO)(b"free again", timeout=5) == b"echo:free again"


def test_a_slow_call_does_not_hold_the_next(served):
    _, demo, channel = served
    held = unary(channel, BLOCK).future(b"", timeout=20)
    assert demo.entered.acquire(timeout=10)
    # the dispatcher running the blocked call answers nothing more; the other one takes over
    assert unary(channel, ECHO)(b"quick", timeout=5) == b"echo:quick"
    assert not held.done()
    demo.release.set()
    assert held.result(timeout=10) == b"released"


def test_a_stream_is_answered_in_order_one_reply_per_message(served):
    _, _, channel = served
    stream = channel.stream_stream(STREAM, request_serializer=None, response_deserializer=None)
    replies = list(stream(iter([b"a", b"b", b"c"]), timeout=5))
    assert replies == [b"echo:a", b"echo:b", b"echo:c"]


def test_health_follows_set_serving(served):
    server, _, channel = served
    health = health_pb2_grpc.HealthStub(channel)
    server.set_serving("", True)
    assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
    server.set_serving("", False)
    assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == \
        health_pb2.HealthCheckResponse.NOT_SERVING
    server.set_serving("demo.Test", True)
    assert health.Check(health_pb2.HealthCheckRequest(service="demo.Test"), timeout=5).status == \
        health_pb2.HealthCheckResponse.SERVING


def test_health_checks_are_answered_as_grpc_s_own_service_would(served):
    # The front end answers Check itself (grpcfront.cpp: grpc++'s service costs two polling
    # threads at normal priority); Watch is not served, which the health protocol allows.
    _, _, channel = served
    health = health_pb2_grpc.HealthStub(channel)
    with pytest.raises(grpc.RpcError) as unknown:
        health.Check(health_pb2.HealthCheckRequest(service="no.Such"), timeout=5)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    check = unary(channel, "/grpc.health.v1.Health/Check")
    # unknown fields are skipped; the service field is what counts
    extra = health_pb2.HealthCheckRequest(service="").SerializeToString() + b"\x10\x05\x1a\x01x"
    assert health_pb2.HealthCheckResponse.FromString(check(extra, timeout=5)).status == \
        health_pb2.HealthCheckResponse.SERVING
    for truncated in (b"\x0a\x05ab", b"\x0a", b"\x80"):
        with pytest.raises(grpc.RpcError) as bad:
            check(truncated, timeout=5)
        assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as watch:
        next(health.Watch(health_pb2.HealthCheckRequest(), timeout=5))
    assert watch.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_stop_lets_held_calls_finish_within_grace(served):
    server, demo, channel = served
    held = unary(channel, BLOCK).future(b"", timeout=20)
    assert demo.entered.acquire(timeout=10)
    stopped = server.stop(5.0)
    threading.Timer(0.3, demo.release.set).start()
    assert held.result(timeout=10) == b"released"
    assert stopped.wait(10)


def test_stop_answers_unavailable_for_what_python_still_holds_after_grace(served):
    server, demo, channel = served
    held = unary(channel, BLOCK).future(b"", timeout=20)
    assert demo.entered.acquire(timeout=10)
    assert server.stop(0.2).wait(15)  # the handler is still blocked; stop does not wait for it
    with pytest.raises(grpc.RpcError) as cut:
        held.result(timeout=10)
    assert cut.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)


@pytest.mark.parametrize("kind, background", [("native", True), ("native", False), ("grpcio", True)])
def test_daemon_serves_the_same_on_either_server(world_dir, kind, background):
    daemon = DaemonProcess(world_dir, env={"HPCPREDICT_DAEMON_SERVER": kind,
                                           "HPCPREDICT_DAEMON_GRPC_IO_BACKGROUND": str(background).lower()}).start()
    try:
        assert f"({kind} server," in daemon.log()
        with grpc.insecure_channel(f"unix:{daemon.socket}") as channel:
            stub = pb_grpc.PredictorStub(channel)
            estimate = stub.Predict(pb.JobRequest(job=pb.JobIdentity(user="ann", application="lmp"),
                                                  resources=pb.Resources(nodes=1, ntasks=4), time_limit_s=3600),
                                    timeout=10)
            assert estimate.prediction_id and estimate.runtime_s > 0
            with pytest.raises(grpc.RpcError) as bad:
                stub.Predict(pb.JobRequest(resources=pb.Resources(nodes=1)), timeout=10)
            assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert bad.value.details().startswith("job.user")
            with pytest.raises(grpc.RpcError) as denied:  # the public socket is never an admin
                stub.GetStatus(pb.StatusRequest(), timeout=10)
            assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with grpc.insecure_channel(f"unix:{admin_socket_path(daemon.socket)}") as channel:
            status = pb_grpc.PredictorStub(channel).GetStatus(pb.StatusRequest(), timeout=10)
            assert status.requests >= 2
        # the C++ threads run at background priority (field 41 of /proc/.../stat: policy 5 = SCHED_IDLE)
        policies = set()
        for task in os.listdir(f"/proc/{daemon.proc.pid}/task"):
            try:  # short-lived threads (the admin relay's) may be gone already
                stat = open(f"/proc/{daemon.proc.pid}/task/{task}/stat").read()
            except FileNotFoundError:
                continue
            policies.add(int(stat.rsplit(")", 1)[1].split()[38]))
        assert (5 in policies) == (kind == "native" and background)
        port = daemon.info["metrics_port"]
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        assert ("hpcpredict_grpc_refused_calls 0.0" in metrics) == (kind == "native")
    finally:
        assert daemon.stop() == 0
