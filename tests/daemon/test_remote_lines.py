"""The remote listener's checks that come before any credential is decoded (daemon/remote.py):
hostile lines get a clear error and never reach munged or the service (``service=None`` here,
so a line that got that far would fail the test)."""
from __future__ import annotations

import json

import pytest

from hpcpredict.daemon.config import host_port
from hpcpredict.daemon.errors import ConfigError
from hpcpredict.daemon.munge import canonical_call
from hpcpredict.daemon.remote import RemoteServer


@pytest.fixture
def server():
    return RemoteServer("127.0.0.1:0", service=None)   # never started


@pytest.mark.parametrize("line, error", [
    (b"not json", "request is not JSON"),
    (b"\xff\xfe", "request is not JSON"),
    (b"[1, 2]", "request must be a JSON object"),
    (b"[" * 100000 + b"]" * 100000, "nested too deeply"),
    (b'{"method": "Nope"}', "method: must be one of Predict"),
    (b'{"method": ["Predict"]}', "method: must be one of Predict"),
    (b'{"method": "Predict"}', "credential refused: none sent"),
    (b'{"method": "Predict", "credential": 7}', "credential refused: none sent"),
    (b'{"method": "Predict", "credential": "' + b"A" * 5000 + b'"}', "not a MUNGE credential"),
    (b'{"method": "Predict", "credential": "MUNGE:\\u0000:"}', "not a MUNGE credential"),
    (b'{"method": "GetStatus", "credential": "MUNGE:x:"}', "not served remotely"),
    (b'{"method": "ReportOutcome"}', "not served remotely"),
])
def test_hostile_lines_are_refused_before_munged_or_the_service(server, line, error):
    reply = server.handle_line(line)
    assert reply["ok"] is False and error in reply["error"], reply


def test_the_signed_bytes_do_not_depend_on_key_order_or_spacing_and_leave_the_credential_out():
    a = json.loads('{"method": "Predict", "request": {"b": 1, "a": [1.5, "\\u00e9"]}, "credential": "MUNGE:x:"}')
    b = json.loads('{"request":{"a":[1.5,"é"],"b":1},"method":"Predict"}')
    assert canonical_call(a) == canonical_call(b) == b'{"method":"Predict","request":{"a":[1.5,"\\u00e9"],"b":1}}'


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
