"""The remote listener's checks that come before any credential is decoded, and those of an
authenticated body before the service (daemon/listeners/remote.py, daemon/remote_wire.py): hostile input
gets a clear error and never reaches munged or the service (``service=None`` here, so input
that got that far would fail the test)."""
from __future__ import annotations

import pytest

from hpcpredict.daemon.config import host_port
from hpcpredict.daemon.errors import ConfigError
from hpcpredict.daemon.listeners import RemoteServer, SeenCredentials
from hpcpredict.daemon.remote_wire import FrameError, HEADER_BYTES, frame, parse_header, reply_digest, request_digest


@pytest.fixture
def server():
    return RemoteServer("127.0.0.1:0", service=None)   # never started


@pytest.mark.parametrize("line, error", [
    (b'{"method": "Predict", "credential": "MUNGE:x:"}', "not an HPCPREDICT/2 request"),
    (b"HPCPREDICT/2 12", "expected 'HPCPREDICT/2 <length> <credential>'"),
    (b"HPCPREDICT/2 x MUNGE:x:", "expected"),
    (b"HPCPREDICT/2 12 MUNGE:x: extra", "expected"),
    (b"HPCPREDICT/2 -1 MUNGE:x:", "expected"),
    (b"HPCPREDICT/2 99999999999999 MUNGE:x:", "expected"),
    (b"HPCPREDICT/2 200000 MUNGE:x:", "longer than 131072 bytes"),
    (b"HPCPREDICT/2 12 MUNGE:\xff:", "not ASCII"),
])
def test_a_header_that_is_not_ours_is_refused_before_munged(line, error):
    with pytest.raises(FrameError, match=error):
        parse_header(line, max_length=128 << 10)


def test_a_frame_announces_its_body_and_the_digests_bind_what_they_name():
    body = b'{"method":"Predict","request":{}}\n'
    data = frame(body, "MUNGE:abc:")
    header, _, rest = data.partition(b"\n")
    assert parse_header(header, max_length=1024) == (len(body), "MUNGE:abc:") and rest == body
    assert len(header) < HEADER_BYTES
    assert request_digest(body) != request_digest(body + b" ")
    assert reply_digest(header, b"x") not in (reply_digest(header, b"y"), reply_digest(header + b"1", b"x"))


@pytest.mark.parametrize("body, error", [
    (b"not json", "request is not JSON"),
    (b"\xff\xfe", "request is not JSON"),
    (b"[1, 2]", "request must be a JSON object"),
    (b"[" * 100000 + b"]" * 100000, "nested too deeply"),
    (b'{"method": "Nope"}', "method: must be one of JobRecord, Predict, UserReport"),
    (b'{"method": ["Predict"]}', "method: must be one of JobRecord, Predict, UserReport"),
    (b'{"method": "GetStatus"}', "not served remotely"),
    (b'{"method": "ReportOutcome"}', "not served remotely"),
    (b'{"method": "Predict", "request": [1]}', "request: must be a JSON object"),
])
def test_hostile_authenticated_bodies_are_refused_before_the_service(server, body, error):
    reply = server.handle_body(body, uid=1234)
    assert reply["ok"] is False and error in reply["error"], reply


def test_accepted_credentials_are_remembered_until_they_expire_and_the_memory_is_bounded():
    seen = SeenCredentials(max_entries=2)
    assert seen.add("MUNGE:a:", expires=1000.0, now=900.0) is True
    assert seen.add("MUNGE:a:", expires=1000.0, now=950.0) is False        # a replay
    assert seen.add("MUNGE:b:", expires=1000.0, now=950.0) is True
    assert seen.add("MUNGE:c:", expires=1000.0, now=950.0) is None         # full: refused, none forgotten early
    assert seen.add("MUNGE:a:", expires=1000.0, now=1000.0 + 61) is True   # expired (and its margin): forgotten
    assert len(seen) == 1


@pytest.mark.parametrize("text", ["ctl", ":7011", "ctl:", "ctl:70000", "ctl:x"])
def test_an_address_that_is_not_host_port_is_a_config_error(text):
    with pytest.raises(ConfigError, match="expected host:port"):
        host_port(text, "[client] remote")


def test_the_cli_asks_remotely_only_where_no_local_socket_is_named_or_exists(tmp_path, monkeypatch):
    from hpcpredict.daemon import client as client_module
    from hpcpredict.daemon.client import DaemonClient, user_client
    from hpcpredict.daemon.config import load_config
    from hpcpredict.daemon.client import RemoteClient

    monkeypatch.delenv("HPCPREDICT_SOCKET", raising=False)
    monkeypatch.setattr(client_module, "SITE_SOCKET", str(tmp_path / "no-site.sock"))
    env = {"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(tmp_path), "HPCPREDICT_CLIENT_REMOTE": "ctl:7011"}
    config = load_config(None, environ=env)
    remote = user_client(None, config)
    assert isinstance(remote, RemoteClient) and remote.address == ("ctl", 7011)
    assert type(user_client(str(tmp_path / "named.sock"), config)) is DaemonClient      # --socket wins
    (tmp_path / "hook.sock").touch()                                                     # a local socket here
    assert type(user_client(None, config)) is DaemonClient
    (tmp_path / "hook.sock").unlink()
    assert type(user_client(None, load_config(None, environ={**env, "HPCPREDICT_CLIENT_REMOTE": ""}))) is DaemonClient
