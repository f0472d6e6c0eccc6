"""Users read their own records through the daemon (``JobRecord`` / ``UserReport``, #40).

A real hpcpredictd (run by root, its store root's and private), real CLI processes run as the
host's ordinary users alice and bob (setpriv): the daemon learns who calls from the kernel
(SO_PEERCRED), answers alice's own job and report, refuses bob's job and report to her, and
answers anyone's to an ``[daemon] admin_users`` user (carol) and to root, who reads the store
file directly. The lines and ``--json`` keys are the same either way.
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hpcpredict.daemon.client import DaemonClient
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from tests.daemon.daemonproc import DaemonProcess

HPCPREDICT = str(Path(sys.executable).with_name("hpcpredict"))
USERS = ("alice", "bob", "carol")


def _users_exist() -> bool:
    try:
        return all(pwd.getpwnam(name) for name in USERS)
    except KeyError:
        return False


pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not _users_exist() or not shutil.which("setpriv"),
                                reason="needs root, setpriv and the users alice, bob, carol")


def seed_job(socket_path: str, user: str, job_id: str, *, runtime_s: float = 60.0, time_limit_s: int = 1200,
             ago_s: int = 120) -> pb.Estimate:
    """What the hooks leave for one ended job (a privileged caller, root): the submission's
    Predict under the job's id, then its outcome linked to it. Returns the submission's answer."""
    with DaemonClient(socket_path) as client:
        request = pb.JobRequest(job=pb.JobIdentity(user=user, job_name="cg", application="cg"), job_id=job_id,
                                time_limit_s=time_limit_s, resources=pb.Resources(nodes=1, ntasks=4),
                                script=b"#!/bin/sh\nsrun ./cg.x\n")
        estimate = client.call("Predict", request)
        now = int(time.time())
        client.call("ReportOutcome", pb.Outcome(
            job_id=job_id, prediction_id=estimate.prediction_id, submit_time=now - ago_s, start_time=now - ago_s + 20,
            end_time=now - ago_s + 20 + int(runtime_s), elapsed_s=runtime_s, state="COMPLETED", request=request))
    return estimate


def as_user(name: str | None, *argv: str, socket_path: str, data: Path):
    """The real CLI as ``name`` (None: root), pointed at the test daemon's data and socket."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(data),
           "HPCPREDICT_SOCKET": socket_path}
    command = [HPCPREDICT, *argv]
    if name is not None:
        entry = pwd.getpwnam(name)
        env.update(USER=name, LOGNAME=name)
        command = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", "--", *command]
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd="/tmp", timeout=120)


@pytest.fixture(scope="module")
def site():
    base = Path(tempfile.mkdtemp(prefix="hpd-records-", dir="/tmp"))
    os.chmod(base, 0o755)
    data = base / "data"
    daemon = DaemonProcess(data, env={"HPCPREDICT_MODELS_BUNDLED": "false", "HPCPREDICT_DAEMON_METRICS": "",
                                      "HPCPREDICT_DAEMON_ADMIN_USERS": "carol"}).start()
    try:
        os.chmod(data, 0o755)        # the socket reachable; the store file stays the daemon's (0600)
        sock = daemon.hook_socket
        jobs = {"alice": [seed_job(sock, "alice", str(700 + n), runtime_s=50.0 + n, ago_s=3600 * (3 - n))
                           for n in range(3)],
                "bob": [seed_job(sock, "bob", "710", runtime_s=80.0)]}
        yield {"daemon": daemon, "socket": sock, "data": data, "jobs": jobs}
    finally:
        daemon.stop()
        shutil.rmtree(base, ignore_errors=True)


def cli(site, name, *argv):
    return as_user(name, *argv, socket_path=site["socket"], data=site["data"])


def test_the_store_is_private_so_a_user_reads_through_the_daemon(site):
    store = next(site["data"].glob("*.sqlite"))
    assert os.stat(store).st_mode & 0o077 == 0, oct(os.stat(store).st_mode)   # what made explain fail (#40)
    done = cli(site, "alice", "explain", "702")
    assert done.returncode == 0, done.stderr
    assert "unable to open database file" not in done.stderr
    assert done.stdout.startswith("Job 702\n") and "user alice" in done.stdout


def test_a_users_own_job_is_explained_with_the_suggestion_stored_at_submission(site):
    estimate = site["jobs"]["alice"][2]
    done = cli(site, "alice", "explain", "702", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    [submit] = [p for p in result["predictions"] if p["stage"] == "submit"]
    assert submit["prediction_id"] == estimate.prediction_id
    assert submit["suggested_time_limit_s"] == estimate.suggested_time_limit_s > 0
    assert result["job"]["user"] == "alice" and [h["job_id"] for h in result["history"]] == ["700", "701"]
    assert "script" not in json.dumps(result["predictions"][0]["inputs"])


def test_the_lines_are_the_same_through_the_daemon_as_from_the_store(site):
    for argv in (("explain", "701"), ("explain", "701", "--json"), ("report", "--user", "alice"),
                 ("report", "--user", "alice", "--json")):
        mine, roots = cli(site, "alice", *argv), cli(site, None, *argv)     # the daemon / the store file
        assert mine.returncode == 0 and roots.returncode == 0, (mine.stderr, roots.stderr)
        assert mine.stdout == roots.stdout, argv


def test_another_users_job_and_report_are_refused(site):
    done = cli(site, "alice", "explain", "710")
    assert done.returncode != 0
    assert "job 710 is another user's: you (alice) may only read the records of your own jobs" in done.stderr
    assert "bob" not in done.stderr and "Traceback" not in done.stderr
    done = cli(site, "alice", "report", "--user", "bob")
    assert done.returncode != 0
    assert "report --user bob: you (alice) may only report on your own jobs" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_users_report_holds_only_their_jobs_and_names_the_stored_suggestion(site):
    done = cli(site, "alice", "report", "--json")       # no --user: the caller's own
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    [row] = report["rows"]
    assert row["user"] == "alice" and row["jobs"] == 3
    assert row["suggested_time"] == site["jobs"]["alice"][2].suggested_time_limit_s
    assert row["suggested_basis"] == "job 702's, as suggested at its submission"
    text = cli(site, "alice", "report").stdout
    assert "suggested_time: job 702's, as suggested at its submission" in text and "bob" not in text


def test_an_admin_user_reads_anyones_through_the_daemon(site):
    done = cli(site, "carol", "explain", "710", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["job"]["user"] == "bob"
    report = json.loads(cli(site, "carol", "report", "--json").stdout)
    assert {"alice", "bob"} <= {row["user"] for row in report["rows"]}


def test_an_unknown_job_is_said_plainly(site):
    done = cli(site, "alice", "explain", "99999")
    assert done.returncode != 0 and "no job 99999 in the store" in done.stderr and "Traceback" not in done.stderr


def test_a_users_record_calls_are_budgeted(site):
    """Past the per-uid budget of record calls (30 a minute; a report costs 5) a user is told to
    wait; the hooks' own calls and other users are not affected."""
    script = ("from hpcpredict.daemon.client import DaemonClient\n"
              "from hpcpredict.proto.v1 import hpcpredict_pb2 as pb\n"
              "import sys\n"
              "c = DaemonClient(sys.argv[1])\n"
              "for n in range(40):\n"
              "    try:\n"
              "        c.call('JobRecord', pb.JobRecordRequest(job_id='710'))\n"
              "    except Exception as e:\n"
              "        print(n, e); break\n")
    entry = pwd.getpwnam("bob")
    done = subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", "--",
                           sys.executable, "-c", script, site["socket"]], capture_output=True, text=True, timeout=60)
    assert "too many record requests from bob: at most 30 a minute" in done.stdout, (done.stdout, done.stderr)
    assert int(done.stdout.split()[0]) >= 25
    assert cli(site, "alice", "explain", "700").returncode == 0      # another user's budget is hers


def test_the_job_output_repeats_the_suggestion_made_at_submission(site):
    """PrologSlurmctld's answer (the job-output line) names the --time stored at submission,
    even when the user's runs changed in between (here: five much longer runs ended)."""
    sock = site["daemon"].hook_socket
    request = pb.JobRequest(job=pb.JobIdentity(user="carol", job_name="md", application="md"), time_limit_s=1200,
                            resources=pb.Resources(nodes=1, ntasks=4))
    with DaemonClient(sock) as client:
        now = int(time.time())
        for n in range(5):
            client.call("ReportOutcome", pb.Outcome(job_id=f"md-{n}", state="COMPLETED", submit_time=now - 9000 + n,
                                                    start_time=now - 9000 + n, end_time=now - 9000 + n + 60,
                                                    elapsed_s=60, request=request))
        submitted = client.call("Predict", request)
        for n in range(5, 10):
            client.call("ReportOutcome", pb.Outcome(job_id=f"md-{n}", state="COMPLETED", submit_time=now - 5000 + n,
                                                    start_time=now - 5000 + n, end_time=now - 5000 + n + 3000,
                                                    elapsed_s=3000, request=request))
        again = client.call("Predict", request)
        allocated = client.call("PredictAtAllocation", pb.AllocationRequest(
            request=request, node_list="n01", job_id="730", prediction_id=submitted.prediction_id))
    assert again.suggested_time_limit_s != submitted.suggested_time_limit_s      # the runs did change it
    assert allocated.suggested_time_limit_s == submitted.suggested_time_limit_s
    record = json.loads(cli(site, None, "explain", "730", "--json").stdout)
    assert [(p["stage"], p["suggested_time_limit_s"]) for p in record["predictions"]] == \
        [("allocation", submitted.suggested_time_limit_s)]      # no outcome links the submission's here
