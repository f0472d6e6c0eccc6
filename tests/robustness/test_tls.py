"""A TCP listener exists only with TLS; over TCP nobody is an admin."""
from __future__ import annotations

import os
import subprocess
import sys

import grpc
import pytest

from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from hpcpredict.proto.v1 import hpcpredict_pb2_grpc as pb_grpc
from tests.robustness.conftest import job, start


@pytest.fixture
def certificate(tmp_path):
    """A self-signed certificate for 127.0.0.1, made by the openssl CLI."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=hpcpredict-test", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return key, cert


def test_tcp_requires_tls_and_grants_no_admin(world_dir, certificate):
    key, cert = certificate
    daemon, client = start(world_dir, HPCPREDICT_DAEMON_TCP="127.0.0.1:0", HPCPREDICT_DAEMON_TLS_CERT=str(cert),
                           HPCPREDICT_DAEMON_TLS_KEY=str(key))
    port = daemon.info["tcp_port"]
    try:
        credentials = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        with grpc.secure_channel(f"127.0.0.1:{port}", credentials) as channel:
            stub = pb_grpc.PredictorStub(channel)
            assert stub.Predict(job(), timeout=10).runtime_s > 0
            with pytest.raises(grpc.RpcError) as caught:
                stub.ReloadModels(pb.ReloadRequest(), timeout=10)
            assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:  # plaintext is not spoken there
            with pytest.raises(grpc.RpcError) as caught:
                pb_grpc.PredictorStub(channel).Predict(job(), timeout=5)
            assert caught.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    finally:
        client.close()
        daemon.stop()


def test_tcp_without_a_certificate_is_refused_at_start(world_dir):
    env = {**os.environ, "HPCPREDICT_DATA_DIR": str(world_dir), "HPCPREDICT_DAEMON_TCP": "127.0.0.1:0"}
    result = subprocess.run([sys.executable, "-m", "hpcpredict.daemon.server", "--socket",
                             str(world_dir / "d.sock")], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "requires tls_cert and tls_key" in result.stderr
