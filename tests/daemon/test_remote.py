"""Users on another host ask the daemon over TCP, named by MUNGE (daemon/remote.py).

Two network namespaces made by the test stand for the controller and a login node, joined by a
veth pair in a private /30 (no interface or address of the host's own network is touched). The
real hpcpredictd runs in the controller's namespace with its remote listener on, next to a real
munged; a second real munged with the same key runs in the login node's, a third with another
key stands for a host outside the site. A throwaway ordinary user runs the real
``hpcpredict predict`` in the login namespace: the daemon can only learn who that is from the
credential (there is no SO_PEERCRED over TCP, and the daemon runs as root in another
namespace). Needs root (namespaces, munged, setpriv).
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tests.daemon.daemonproc import DaemonProcess

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip") or not os.path.exists("/usr/sbin/munged"),
                                reason="needs root, iproute2 and munged")

CTL_ADDRESS, LOGIN_ADDRESS, PORT = "10.251.7.1", "10.251.7.2", 7011
REMOTE = f"{CTL_ADDRESS}:{PORT}"
PER_HOST = 4
PER_USER_RATE = 5
RATE = 50
HPCPREDICT = str(Path(sys.executable).with_name("hpcpredict"))


def run(*argv, **kwargs):
    return subprocess.run(argv, check=True, capture_output=True, text=True, **kwargs)


@pytest.fixture(scope="module")
def site():
    """The two namespaces, three munged, the daemon; everything stopped and removed after."""
    tag = f"{os.getpid() % 100000}"
    ctl, login = f"hpcpr-ctl-{tag}", f"hpcpr-login-{tag}"
    base = Path(tempfile.mkdtemp(prefix="hpd-remote-", dir="/tmp"))
    os.chmod(base, 0o755)
    keys, runs = base / "keys", base / "run"
    keys.mkdir(mode=0o700)
    runs.mkdir(mode=0o755)
    mungeds: list[subprocess.Popen] = []
    daemon = None
    namespaces = []
    netns_mounted = _mounted("/run/netns")     # iproute2 bind-mounts it at the first `ip netns add`
    try:
        for name in (ctl, login):
            run("ip", "netns", "add", name)
            namespaces.append(name)
            run("ip", "-n", name, "link", "set", "lo", "up")
        # made inside the controller's namespace, its peer moved straight into the login node's
        run("ip", "-n", ctl, "link", "add", f"hpr{tag}c", "type", "veth", "peer", "name", f"hpr{tag}l", "netns", login)
        for name, device, address in ((ctl, f"hpr{tag}c", CTL_ADDRESS), (login, f"hpr{tag}l", LOGIN_ADDRESS)):
            run("ip", "-n", name, "addr", "add", f"{address}/30", "dev", device)
            run("ip", "-n", name, "link", "set", device, "up")
        for key in ("site", "other"):
            (keys / f"{key}.key").write_bytes(os.urandom(1024))
            os.chmod(keys / f"{key}.key", 0o400)
        def start_munged(name, namespace, key):
            mungeds.append(subprocess.Popen(
                ["ip", "netns", "exec", namespace, "/usr/sbin/munged", "--foreground", f"--key-file={keys / key}.key",
                 f"--socket={runs / name}.sock", f"--pid-file={runs / name}.pid", f"--log-file={keys / name}.log",
                 f"--seed-file={keys / name}.seed"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            _wait_for_munged(runs / f"{name}.sock")
            return mungeds[-1]

        for name, namespace, key in (("ctl", ctl, "site"), ("login", login, "site"), ("rogue", login, "other")):
            start_munged(name, namespace, key)
        data = base / "daemon"
        daemon = DaemonProcess(data, prefix=("ip", "netns", "exec", ctl), env={
            "HPCPREDICT_MODELS_BUNDLED": "false", "HPCPREDICT_DAEMON_METRICS": "",
            "HPCPREDICT_DAEMON_REMOTE_LISTEN": REMOTE, "HPCPREDICT_DAEMON_MUNGE_SOCKET": str(runs / "ctl.sock"),
            "HPCPREDICT_DAEMON_REMOTE_MAX_CONNECTIONS_PER_HOST": str(PER_HOST),
            "HPCPREDICT_DAEMON_REMOTE_MAX_RATE_PER_USER": str(PER_USER_RATE),
            "HPCPREDICT_DAEMON_REMOTE_MAX_RATE": str(RATE),
            "HPCPREDICT_DAEMON_REQUEST_TIMEOUT_S": "1"}).start()
        job = base / "job.sh"
        job.write_text("#!/bin/sh\n#SBATCH -N 2\nsrun ./cg.x -n 64\n")
        job.chmod(0o644)
        yield {"login": login, "runs": runs, "daemon": daemon, "job": job, "mungeds": mungeds,
               "restart_ctl_munged": lambda: start_munged("ctl", ctl, "site")}
    finally:
        if daemon is not None:
            daemon.stop()
        for process in mungeds:
            if process.poll() is None:
                process.terminate()
        for process in mungeds:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for name in namespaces:     # takes the veth pair with it
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        if not netns_mounted and _mounted("/run/netns") and not os.listdir("/run/netns"):
            subprocess.run(["umount", "/run/netns"], capture_output=True)   # busy (kept) if another made one since
        shutil.rmtree(base, ignore_errors=True)


def _mounted(path: str) -> bool:
    """A mount point (os.path.ismount misses a bind mount of the same file system)."""
    with open("/proc/self/mountinfo") as mounts:
        return any(line.split()[4] == path for line in mounts)


def _wait_for_munged(sock: Path) -> None:
    for _ in range(100):
        probe = subprocess.run(f"munge -S {sock} -n | unmunge -S {sock}", shell=True, capture_output=True)
        if probe.returncode == 0:
            return
        time.sleep(0.05)
    raise RuntimeError(f"munged at {sock} did not start")


@pytest.fixture(scope="module")
def user():
    """A throwaway ordinary user: no home, no shell, no groups of ours."""
    name = f"hpdr{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def on_login_node(site, argv, user=None, munge="login", extra_env=None):
    """Run ``argv`` in the login node's namespace (as ``user``), its CLI set up as a site would."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "HPCPREDICT_CONFIG_PATH": "",
           "HPCPREDICT_CLIENT_REMOTE": REMOTE, "HPCPREDICT_CLIENT_DAEMON_USER": "root", "HPCPREDICT_DAEMON_MUNGE_SOCKET": str(site["runs"] / f"{munge}.sock"),
           **(extra_env or {})}
    if user is not None:
        env.update(USER=user.pw_name, LOGNAME=user.pw_name)
        argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--", *argv]
    return subprocess.run(["ip", "netns", "exec", site["login"], *argv], capture_output=True, text=True,
                          env=env, cwd="/tmp", timeout=60)


PROBE = textwrap.dedent('''
    import json, socket, sys, time
    from hpcpredict.daemon import munge
    from hpcpredict.daemon.remote_wire import frame, request_digest

    def exchange(data, timeout=10):
        # the raw reply frame -> (its header line, its body)
        conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=timeout)
        conn.sendall(data)
        received = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            received += chunk
        conn.close()
        header, _, body = received.partition(b"\\n")
        return header, body

    def send(data, timeout=10):
        return json.loads(exchange(data, timeout)[1])

    def body_of(call):
        return json.dumps(call).encode() + b"\\n"

    def signed(call, sock):
        body = body_of(call)
        return frame(body, munge.encode(request_digest(body), sock))
''')


def probe(site, body: str, user=None, munge="login") -> list:
    """Run ``body`` (after the PROBE helpers) in the login namespace; one JSON value per line out."""
    result = on_login_node(site, [sys.executable, "-c", PROBE + textwrap.dedent(body), CTL_ADDRESS, str(PORT),
                                  str(site["runs"] / f"{munge}.sock")], user=user)
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_a_user_on_a_login_node_gets_a_prediction_of_their_own_job(site, user):
    result = on_login_node(site, [HPCPREDICT, "predict", str(site["job"]), "-t", "30:00", "--json"], user=user)
    assert result.returncode == 0, result.stderr
    estimate = json.loads(result.stdout)
    assert estimate["runtime_s"] > 0 and estimate["suggested_time_limit_s"] > 0 and estimate["prediction_id"]
    named = on_login_node(site, [HPCPREDICT, "predict", str(site["job"]), "--user", user.pw_name], user=user)
    assert named.returncode == 0 and "Predicted runtime" in named.stdout, named.stderr


def test_a_user_is_refused_another_users_job_named_by_munge_not_by_the_request(site, user):
    result = on_login_node(site, [HPCPREDICT, "predict", str(site["job"]), "--user", "root"], user=user)
    assert result.returncode == 1
    # the daemon (root, in another namespace, over TCP) knows the caller only from the credential
    assert f"you ({user.pw_name}) may only ask about your own jobs, not 'root'" in result.stderr


def test_admin_and_history_writing_calls_are_refused_remotely_even_to_root(site, user):
    body = '''
        for method, request in (("GetStatus", {}), ("ReloadModels", {}), ("ListModels", {}),
                                ("ReportOutcome", {"job_id": "1", "state": "COMPLETED", "elapsed_s": 5}),
                                ("PredictAtAllocation", {"node_list": "n1"})):
            time.sleep(1 / 4)     # within the per-user rate: each request is authenticated first
            print(json.dumps(send(signed({"method": method, "request": request}, sys.argv[3]))))
    '''
    for who in (None, user):    # None: root on the login node
        replies = probe(site, body, user=who)
        assert len(replies) == 5
        for reply in replies:
            assert reply["ok"] is False and reply["code"] == "PERMISSION_DENIED", reply
            assert "not served remotely" in reply["error"]


def test_a_credential_of_another_munge_key_is_refused(site, user):
    result = on_login_node(site, [HPCPREDICT, "predict", str(site["job"])], user=user, munge="rogue")
    assert result.returncode == 1
    # the daemon refuses it, and this host's munged cannot check the daemon's credential either
    assert "Invalid credential" in result.stderr and "site's munge.key" in result.stderr, result.stderr


def test_replayed_expired_mismatched_missing_and_malformed_credentials_are_refused(site, user):
    replies = probe(site, '''
        import subprocess, time
        call = {"method": "Predict", "request": {"time_limit_s": 600}}
        line = signed(call, sys.argv[3])
        print(json.dumps(send(line)))
        print(json.dumps(send(line)))                                   # the same credential again
        other = dict(call, request={"time_limit_s": 60})                # a fresh one, for another request
        credential = munge.encode(request_digest(body_of(call)), sys.argv[3])
        print(json.dumps(send(frame(body_of(other), credential))))
        print(json.dumps(send(frame(body_of(call), ""))))               # none
        print(json.dumps(send(frame(body_of(call), "MUNGE:bogus:"))))
        short = subprocess.run(["munge", "-S", sys.argv[3], "-t", "1", "-s", request_digest(body_of(call)).decode()],
                               capture_output=True, text=True, check=True).stdout.strip()
        time.sleep(2.5)
        print(json.dumps(send(frame(body_of(call), short))))
    ''', user=user)
    first, replayed, mismatched, missing, malformed, expired = replies
    assert first["ok"] is True and first["response"]["runtime_s"] > 0
    for reply in replies[1:]:
        assert reply["ok"] is False and reply["code"] == "UNAUTHENTICATED", reply
    assert "Replayed credential" in replayed["error"]
    assert "made for another request" in mismatched["error"]
    assert "none sent" in missing["error"]
    assert "not a MUNGE credential" in malformed["error"] or "Failed to base64" in malformed["error"]
    assert "Expired credential" in expired["error"]


def test_idle_connections_make_room_for_requests_and_a_slow_request_is_cut_off(site, user):
    """PER_HOST connections of one address holding their places without a header do not keep
    the next request out: the oldest is cut off for it; a header begun and never ended is cut
    off at the request timeout."""
    replies = probe(site, f'''
        import time
        held = [socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10) for _ in range({PER_HOST})]
        time.sleep(0.3)
        print(json.dumps(send(signed({{"method": "Predict", "request": {{}}}}, sys.argv[3]))))
        held[0].settimeout(5)
        print(json.dumps(json.loads(held[0].recv(65536).partition(b"\\n")[2])))   # cut off, told busy
        held[1].sendall(b'HPCPREDICT/2 ')                             # and never the rest
        held[1].settimeout(5)
        start = time.monotonic()
        data = held[1].recv(65536)
        print(json.dumps({{"cut_after_s": time.monotonic() - start, "reply": json.loads(data.partition(b"\\n")[2])}}))
        for conn in held:
            conn.close()
    ''', user=user)
    served, cut, slow = replies
    assert served["ok"] is True, served
    assert cut == {"ok": False, "error": "busy"}
    assert slow["reply"]["ok"] is False and "not complete within 1 s" in slow["reply"]["error"]
    assert slow["cut_after_s"] < 3.0


def test_without_remote_configured_the_error_says_what_to_do_on_a_login_node(site, user):
    result = on_login_node(site, [HPCPREDICT, "predict", str(site["job"])], user=user,
                           extra_env={"HPCPREDICT_CLIENT_REMOTE": ""})
    assert result.returncode == 1
    assert "On a login or compute node" in result.stderr and "HPCPREDICT_CLIENT_REMOTE" in result.stderr


def test_one_user_is_held_to_their_rate_and_others_are_not(site, user):
    replies = probe(site, f'''
        import os, pwd
        me = pwd.getpwuid(os.getuid()).pw_name
        call = {{"method": "Predict", "request": {{"job": {{"user": me}}, "time_limit_s": 600}}}}
        lines = [signed(call, sys.argv[3]) for _ in range({PER_USER_RATE} * 3)]
        print(json.dumps([send(line) for line in lines]))
    ''')     # as root: its own bucket
    served = [reply for reply in replies[0] if reply["ok"]]
    busy = [reply for reply in replies[0] if reply == {"ok": False, "error": "busy"}]
    assert len(served) + len(busy) == PER_USER_RATE * 3
    assert PER_USER_RATE <= len(served) < PER_USER_RATE * 3 and busy
    # another user's bucket is their own
    result = on_login_node(site, [HPCPREDICT, "predict", str(site["job"])], user=user)
    assert result.returncode == 0, result.stderr


def test_a_connection_flood_is_taken_at_the_accept_rate_not_at_the_floods(site, user):
    """What the listener spends on a flood (here 120 connections at once from one host, most
    over its per-host cap) is bounded by its accept rate: the answers come at about RATE a
    second however fast the connections arrive; the rest wait in the kernel's backlog."""
    replies = probe(site, '''
        import time
        start = time.monotonic()
        conns = [socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=20) for _ in range(120)]
        for conn in conns:
            conn.sendall(signed({"method": "GetStatus"}, sys.argv[3]))
        answers = []
        for conn in conns:
            data = b""
            while True:
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            answers.append(json.loads(data.partition(b"\\n")[2]) if data else None)
            conn.close()
        print(json.dumps({"seconds": time.monotonic() - start, "answers": answers}))
    ''', user=user)
    result = replies[0]
    assert all(answer is not None for answer in result["answers"])    # every one answered, none reset
    assert result["seconds"] >= (120 - RATE) / RATE * 0.8, result["seconds"]


def test_the_daemons_munged_down_is_unavailable_and_a_fault_not_a_refusal_of_the_user(site, user):
    from hpcpredict.daemon.client import admin_client
    from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

    ctl_munged = site["mungeds"][0]
    ctl_munged.terminate()
    ctl_munged.wait(10)
    try:
        body = '''
            print(json.dumps(send(signed({"method": "Predict", "request": {}}, sys.argv[3]))))
        '''
        down = probe(site, body, user=user)[0]
        assert down["ok"] is False and down["code"] == "UNAVAILABLE" and "munged" in down["error"]
        with admin_client(site["daemon"].hook_socket) as client:
            assert any(line.startswith("munge") for line in client.call("GetStatus", pb.StatusRequest()).faults)
    finally:
        site["mungeds"][0] = site["restart_ctl_munged"]()
    assert probe(site, body, user=user)[0]["ok"] is True
    with admin_client(site["daemon"].hook_socket) as client:
        assert not any(line.startswith("munge") for line in client.call("GetStatus", pb.StatusRequest()).faults)
