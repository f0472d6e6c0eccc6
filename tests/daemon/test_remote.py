"""Users on another host ask the daemon over TCP, named by MUNGE (daemon/listeners/remote.py).

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

import base64
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from tests.daemon.daemonproc import DaemonProcess
from tests.forecast.stand_ins import slurm_stand_ins

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("ip") or not os.path.exists("/usr/sbin/munged"),
                                reason="needs root, iproute2 and munged")

CTL_ADDRESS, LOGIN_ADDRESS, PORT = "10.251.7.1", "10.251.7.2", 7011
METRICS_PORT = 947      # below 1024: no user of the controller can bind it (ADMIN.md)
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
        queue_tools = slurm_stand_ins(base / "bin")  # the real 22.05 queue (tests/data/slurm), for When
        daemon = DaemonProcess(data, prefix=("ip", "netns", "exec", ctl), env={
            "HPCPREDICT_POLICY_CONTROLLER_CONFIG_COMMAND": f"{queue_tools}/scontrol show config",
            "HPCPREDICT_FORECAST_SQUEUE_COMMAND": f"{queue_tools}/squeue", "HPCPREDICT_FORECAST_INTERVAL_S": "1",
            "HPCPREDICT_MODELS_BUNDLED": "false", "HPCPREDICT_DAEMON_METRICS": f"{CTL_ADDRESS}:{METRICS_PORT}",
            "HPCPREDICT_DAEMON_REMOTE_LISTEN": REMOTE, "HPCPREDICT_DAEMON_MUNGE_SOCKET": str(runs / "ctl.sock"),
            "HPCPREDICT_DAEMON_REMOTE_MAX_CONNECTIONS_PER_HOST": str(PER_HOST),
            "HPCPREDICT_DAEMON_REMOTE_MAX_RATE_PER_USER": str(PER_USER_RATE),
            "HPCPREDICT_DAEMON_REMOTE_MAX_RATE": str(RATE),
            "HPCPREDICT_DAEMON_REQUEST_TIMEOUT_S": "1"}).start()
        job = base / "job.sh"
        job.write_text("#!/bin/sh\n#SBATCH -N 2\nsrun ./cg.x -n 64\n")
        job.chmod(0o644)
        yield {"login": login, "ctl": ctl, "runs": runs, "daemon": daemon, "job": job, "mungeds": mungeds,
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
        try:
            conn.sendall(data)
        except OSError:
            pass    # refused before it read everything: the reply is still there to read
        received = b""
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            received += chunk
        conn.close()
        return last_frame(received)

    def last_frame(received):
        # (header line, body) of the last frame: a go-ahead comes first (the body was sent with the header)
        frames = []
        while received:
            header, _, rest = received.partition(b"\\n")
            fields = header.split(b" ")
            length = int(fields[1]) if len(fields) == 3 and fields[1].isdigit() else len(rest)
            frames.append((header, rest[:length]))
            received = rest[length:]
        return frames[-1] if frames else (b"", b"")

    def send(data, timeout=10):
        return json.loads(exchange(data, timeout)[1])

    def body_of(call):
        return json.dumps(call).encode() + b"\\n"

    def signed(call, sock):
        body = body_of(call)
        return frame(body, munge.encode(request_digest(body), sock))
''')


def in_namespace(site, namespace: str, body: str, user=None, munge="login") -> subprocess.Popen:
    """Start ``body`` (after the PROBE helpers) in ``namespace`` (as ``user``): its stdout, one JSON value a line."""
    argv = [sys.executable, "-c", PROBE + textwrap.dedent(body), CTL_ADDRESS, str(PORT), str(site["runs"] / f"{munge}.sock")]
    if user is not None:
        argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups", "--", *argv]
    return subprocess.Popen(["ip", "netns", "exec", namespace, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd="/tmp", env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"})


def finished(process: subprocess.Popen, timeout: float = 60) -> list:
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err
    return [json.loads(line) for line in out.splitlines()]


def scrape(site) -> str:
    """The metrics endpoint as Prometheus on the login node would see it."""
    body = f'''
        conn = socket.create_connection(("{CTL_ADDRESS}", {METRICS_PORT}), timeout=10)
        conn.sendall(b"GET /metrics HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
        print(json.dumps(data.decode()))
    '''
    return finished(in_namespace(site, site["login"], body))[0]


def refusals(text: str) -> dict[str, float]:
    """hpcpredict_remote_refusals_total by reason, from the metrics text."""
    found = {}
    for line in text.splitlines():
        if line.startswith("hpcpredict_remote_refusals_total{"):
            labels, value = line.rsplit(" ", 1)
            found[labels.split('reason="')[1].split('"')[0]] = float(value)
    return found


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


def test_when_from_a_login_node_answers_a_users_own_job_and_refuses_anothers(site, user):
    try:
        bob = pwd.getpwnam("bob")
    except KeyError:
        pytest.skip("needs the test user bob (the Slurm test clusters create him)")
    mine = on_login_node(site, [HPCPREDICT, "when", "2", "--json"], user=bob)
    if mine.returncode and "no forecast yet" in mine.stderr:     # the daemon's first read: a second at most
        time.sleep(2)
        mine = on_login_node(site, [HPCPREDICT, "when", "2", "--json"], user=bob)
    assert mine.returncode == 0, mine.stderr
    answer = json.loads(mine.stdout)
    assert answer["user"] == "bob" and answer["state"] == "PENDING" and answer["median_start_s"] > 0
    theirs = on_login_node(site, [HPCPREDICT, "when", "2"], user=user)      # named by MUNGE, not by the request
    assert theirs.returncode == 1 and f"job 2 is not yours: you ({user.pw_name})" in theirs.stderr


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
    """32 connections of one address (8 times its cap) holding places without a header do not
    keep the next requests out (before: every other user of that login node got `busy`, 0/30):
    the oldest idle one is cut off (told busy) for each new one; a header begun and never
    ended is cut off at the request timeout."""
    replies = probe(site, f'''
        import time
        held = [socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10) for _ in range({PER_HOST} * 8)]
        time.sleep(0.5)
        served = []
        for _ in range({PER_USER_RATE}):
            served.append(send(signed({{"method": "Predict", "request": {{}}}}, sys.argv[3]))["ok"])
            time.sleep(0.25)
        print(json.dumps(served))
        held[0].settimeout(5)
        print(json.dumps(json.loads(held[0].recv(65536).partition(b"\\n")[2])))   # cut off, told busy
        slow = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
        slow.sendall(b'HPCPREDICT/2 ')                                # and never the rest
        start = time.monotonic()
        data = slow.recv(65536)
        print(json.dumps({{"cut_after_s": time.monotonic() - start, "reply": json.loads(data.partition(b"\\n")[2])}}))
        for conn in held:
            conn.close()
    ''', user=user)
    served, cut, slow = replies
    assert served == [True] * PER_USER_RATE, served
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
            answers.append(json.loads(last_frame(data)[1]) if data else None)
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


def _hook_call(path: str, line: bytes) -> tuple[float, dict]:
    """One call as the Slurm hook makes it (connected as the Slurm user): (seconds, reply)."""
    slurm = pwd.getpwnam("slurm")
    start = time.monotonic()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(10)
    os.setegid(slurm.pw_gid)
    os.seteuid(slurm.pw_uid)
    try:
        conn.connect(path)
    finally:
        os.seteuid(0)
        os.setegid(0)
    try:
        conn.sendall(line)
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    finally:
        conn.close()
    return time.monotonic() - start, json.loads(data) if data else {}



def test_unauthenticated_floods_do_not_delay_the_slurm_hooks_calls_and_are_counted(site):
    """From outside (the login node's namespace, no credential): 2 connections sending 2.33 MiB
    lines over and over, as fast as the listener takes them. Before, each line was parsed
    whole before its credential was looked at (another user's sbatch got a prediction 3 times
    in 101). Now the listener reads at most a header's 4 KiB before munged has said who sends
    it: the Slurm hook's calls on the local socket are answered within their 300 ms budget."""
    before = refusals(scrape(site))
    attack = in_namespace(site, site["login"], '''
        import threading, time
        line = b"[" + b"[]," * (int(2.33 * 2 ** 20) // 3) + b"[]]\\n"   # 2.33 MiB of JSON lists: 0.4-0.7 s to parse
        replies, sent, stop = [], [0], time.monotonic() + 8
        def flood():
            while time.monotonic() < stop:
                try:
                    conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
                    sent[0] += 1
                    try:
                        conn.sendall(line)
                    except OSError:
                        pass    # refused before it read everything
                    data = conn.recv(65536)
                    if data:
                        replies.append(json.loads(data.partition(b"\\n")[2])["error"])
                    conn.close()
                except OSError:
                    pass
        threads = [threading.Thread(target=flood) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(json.dumps({"sent": sent[0], "replies": replies}))
    ''')
    time.sleep(1.0)     # the flood runs
    script = base64.b64encode(b"#!/bin/sh\n#SBATCH -N 2\n" + b"#SBATCH --comment=x\n" * 400 + b"srun ./cg.x\n").decode()
    hook_line = json.dumps({"method": "Predict", "request": {
        "job": {"user": "bob", "application": "lmp"}, "resources": {"nodes": 2, "ntasks": 8},
        "time_limit_s": 3600, "script": script}}).encode() + b"\n"
    calls = []
    while attack.poll() is None and len(calls) < 400:
        calls.append(_hook_call(site["daemon"].hook_socket, hook_line))
        time.sleep(0.01)
    flood = finished(attack)[0]
    within = sum(1 for seconds, reply in calls if reply.get("ok") and seconds <= 0.3)
    assert len(calls) >= 100 and within >= 0.99 * len(calls), (within, len(calls))
    # the flood was refused at its header, each connection counted (and logged, not once each)
    assert flood["sent"] >= 20 and flood["replies"]
    assert all("not an HPCPREDICT/2 request" in reply for reply in flood["replies"])
    counted = refusals(scrape(site))
    assert counted.get("header", 0) - before.get("header", 0) >= len(flood["replies"]), counted
    logged = [line for line in site["daemon"].log().splitlines() if "refused a request from" in line and "(header)" in line]
    assert 1 <= len(logged) <= len(flood["replies"]) // 2 + 2
    print(f"hook calls within 300 ms: {within}/{len(calls)}; flood connections {flood['sent']}, "
          f"refusals counted {counted.get('header', 0) - before.get('header', 0):g}")


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def test_slow_connections_sending_megabytes_without_a_newline_hold_kilobytes_each(site, user):
    """128 connections each sending 2.33 MiB without a newline, held open (before: the daemon's
    memory grew by 446 MB, not returned): before its credential is checked a connection is
    kept to one header (4 KiB), and one of a flood of them is cut off when a new one comes."""
    pid = site["daemon"].proc.pid
    rss_before = _rss_kib(pid)
    attack = in_namespace(site, site["login"], '''
        import threading, time
        chunk = b"HPCPREDICT/2 " + b"A" * int(2.33 * 2 ** 20)      # a header that never ends
        conns = []
        def one():
            try:
                conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=10)
                conns.append(conn)
                conn.sendall(chunk)
            except OSError:
                pass
        threads = [threading.Thread(target=one) for _ in range(128)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(json.dumps(len(conns)))
        sys.stdout.flush()
        time.sleep(3)
    ''')
    peak = rss_before
    while attack.poll() is None:
        peak = max(peak, _rss_kib(pid))
        time.sleep(0.05)
    assert finished(attack)[0] == 128
    grew_mib = (peak - rss_before) / 1024
    print(f"daemon RSS {rss_before / 1024:.0f} MiB before, peak {peak / 1024:.0f} MiB under 128 slow connections")
    assert grew_mib < 32, grew_mib
    # and every user is still served
    served = probe(site, '''
        print(json.dumps(send(signed({"method": "Predict", "request": {}}, sys.argv[3]))))
    ''', user=user)[0]
    assert served["ok"] is True, served


def test_an_authenticated_remote_user_is_held_to_the_local_sockets_limits(site, user):
    """Past the credential a remote caller is an ordinary user: the local socket's item limits
    and line size (before: a 70,000-message comm was accepted remotely; locally the cap is 1,024;
    now its 2.2 MB body is refused by its announced length, and 2,000 messages by their count)."""
    replies = probe(site, '''
        import time
        messages = [{"src": 0, "dst": 1, "bytes": 8}] * 2000        # 2,000 in 60 KiB: within the line size
        print(json.dumps(send(signed({"method": "Predict", "request": {"comm": {"messages": messages}}}, sys.argv[3]))))
        time.sleep(0.3)
        big = {"method": "Predict", "request": {"job": {"name": "x" * 200000}}}
        print(json.dumps(send(signed(big, sys.argv[3]))))
    ''', user=user)
    many, big = replies
    assert many["ok"] is False and many["code"] == "INVALID_ARGUMENT"
    assert "comm.messages: 2000 messages exceed the limit 1024" in many["error"]
    assert big["ok"] is False and "longer than 131072 bytes" in big["error"]


def test_a_captured_request_is_refused_again_after_the_controllers_munged_restarts(site, user):
    """munged's replay cache is in its memory: the daemon remembers each credential it accepted
    until it expires, so a captured request (here its bytes, replayed by anyone) is refused
    also once munged restarted (before: accepted again, answered with the victim's history)."""
    captured = probe(site, '''
        import base64
        line = signed({"method": "Predict", "request": {"time_limit_s": 600}}, sys.argv[3])
        print(json.dumps([base64.b64encode(line).decode(), send(line)]))
    ''', user=user)[0]
    assert captured[1]["ok"] is True
    ctl_munged = site["mungeds"][0]
    ctl_munged.terminate()
    ctl_munged.wait(10)
    site["mungeds"][0] = site["restart_ctl_munged"]()
    replayed = probe(site, f'''
        import base64
        print(json.dumps(send(base64.b64decode("{captured[0]}"))))
    ''')[0]
    assert replayed["ok"] is False and replayed["code"] == "UNAUTHENTICATED", replayed
    assert "the daemon accepted it before" in replayed["error"]
    assert refusals(scrape(site)).get("replayed", 0) >= 1


SQUATTER = '''
    import errno, itertools
    try:
        socket.create_server((sys.argv[1], {metrics_port}))
        print(json.dumps("metrics port taken"))
    except PermissionError:
        print(json.dumps("metrics port refused"))
    listener = socket.create_server((sys.argv[1], int(sys.argv[2])), reuse_port=False)
    print(json.dumps("remote port taken"))
    sys.stdout.flush()
    forged = (json.dumps({{"ok": True, "response": {{"runtime_s": 4242, "suggested_time_limit_s": 4242,
                                                    "prediction_id": "squatter"}}}}) + "\\n").encode()
    for turn in itertools.count():
        conn, _ = listener.accept()
        conn.settimeout(5)
        try:
            header = b""
            while b"\\n" not in header:
                header += conn.recv(65536)
            if turn % 2:
                credential = ""          # unsigned
            else:                        # signed, by her
                credential = munge.encode(b"hpcpredict.v2 reply sha256 x", sys.argv[3])
            conn.sendall(frame(forged, credential))
            after, stop = 0, time.monotonic() + 1
            while time.monotonic() < stop:      # does a body (the job script) follow?
                chunk = conn.recv(65536)
                if not chunk:
                    break
                after += len(chunk)
            print(json.dumps({{"header": header.startswith(b"HPCPREDICT/2 "), "after_header": after}}))
            sys.stdout.flush()
        except OSError:
            pass
        conn.close()
'''


def test_a_user_holding_the_ports_during_a_restart_is_believed_by_no_one(site, user):
    """An ordinary user of the controller binds the remote port while the daemon restarts (and
    tries the metrics port, below 1024). Before: the daemon exited (`Address already in use`),
    and `hpcpredict predict` on the login nodes sent her their scripts and printed her answer.
    Now the daemon serves its local socket, says loudly that it cannot listen (status, log,
    health) and retries; the login node's CLI sends her no job script (only a header: the body
    goes after the daemon's signed go-ahead) and refuses her answers, signed by her or not;
    Prometheus sees the daemon; once she leaves, the daemon takes the port back."""
    from hpcpredict.daemon.client import admin_client
    from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    import grpc

    daemon = site["daemon"]
    daemon.stop()
    squatter = in_namespace(site, site["ctl"], SQUATTER.format(metrics_port=METRICS_PORT), user=user, munge="ctl")
    try:
        assert json.loads(squatter.stdout.readline()) == "metrics port refused"
        assert json.loads(squatter.stdout.readline()) == "remote port taken"
        daemon.start()
        assert daemon.info["remote"] == ""
        with admin_client(daemon.hook_socket) as client:
            faults = client.call("GetStatus", pb.StatusRequest()).faults
            request = pb.JobRequest(time_limit_s=600)
            request.job.user = "bob"
            assert client.call("Predict", request).runtime_s > 0    # the local socket serves
        assert any(f.startswith("remote listener") and "cannot listen on" in f for f in faults), faults
        assert "remote listener cannot listen on" in daemon.log()
        with grpc.insecure_channel(f"unix:{daemon.socket}") as channel:
            check = health_pb2_grpc.HealthStub(channel).Check
            assert check(health_pb2.HealthCheckRequest(service="hpcpredict.remote_listener"), timeout=5).status \
                == health_pb2.HealthCheckResponse.NOT_SERVING
        text = scrape(site)
        assert 'hpcpredict_fault{component="remote listener",operation="listen"} 1.0' in text
        for _ in range(2):   # signed by her, then unsigned
            result = on_login_node(site, [HPCPREDICT, "predict", str(site["job"]), "--json"], user=user)
            assert result.returncode == 1
            assert "does not come from the daemon" in result.stderr, result.stderr
            assert "4242" not in result.stdout + result.stderr
            # she got the header (a credential for a body she never sees), not the job script
            assert json.loads(squatter.stdout.readline()) == {"header": True, "after_header": 0}
    finally:
        squatter.kill()
        squatter.wait()
    for _ in range(150):     # she left: the daemon binds the port within its retry interval
        result = on_login_node(site, [HPCPREDICT, "predict", str(site["job"]), "--json"], user=user)
        if result.returncode == 0:
            break
        time.sleep(0.1)
    assert result.returncode == 0, result.stderr + daemon.log()
    with admin_client(daemon.hook_socket) as client:
        assert not any(f.startswith("remote listener") for f in client.call("GetStatus", pb.StatusRequest()).faults)


def test_a_user_on_a_login_node_reads_their_own_records_and_not_anothers(site, user):
    """explain and report from a login node: the daemon knows the caller from MUNGE, answers
    their own job and report, refuses root's job and another user's report (#40)."""
    from tests.daemon.test_own_records import seed_job

    mine = seed_job(site["daemon"].hook_socket, user.pw_name, "8801")
    seed_job(site["daemon"].hook_socket, "root", "8802")
    done = on_login_node(site, [HPCPREDICT, "explain", "8801", "--json"], user=user)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["job"]["user"] == user.pw_name
    assert [p["suggested_time_limit_s"] for p in result["predictions"]] == [mine.suggested_time_limit_s]
    done = on_login_node(site, [HPCPREDICT, "report", "--json"], user=user)
    assert done.returncode == 0, done.stderr
    assert [row["user"] for row in json.loads(done.stdout)["rows"]] == [user.pw_name]
    refused = on_login_node(site, [HPCPREDICT, "explain", "8802"], user=user)
    assert refused.returncode != 0 and "job 8802 is another user's" in refused.stderr, refused.stderr
    refused = on_login_node(site, [HPCPREDICT, "report", "--user", "root"], user=user)
    assert refused.returncode != 0 and f"you ({user.pw_name}) may only report on your own jobs" in refused.stderr
