"""One answer per job, and users reading their own records, on the real Slurm 22.05 (#40).

A submitted job's sbatch line (job_submit.lua), its job output (PrologSlurmctld -> TaskProlog),
``hpcpredict predict`` asked before, ``explain`` and ``report`` after it ended name the same
``--time``: the one stored at submission. ``explain`` and ``report`` run as the job's user,
an ordinary user who cannot open the daemon's store, so they go through the daemon (the
local socket, SO_PEERCRED); another user's job and report are refused to her.

Its own hpcpredictd in advise mode (the sbatch line then names the suggestion; the session
daemon runs bound mode), run by root with its store private (0600), as a site installs it.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from .harness import VENV_BIN, Daemon, poll
from .test_backfill_policy import seed, squeue_empty

SCRIPT = "#!/bin/bash\n#SBATCH -J onea\nsleep 2\n"
RUNS = [400.0, 410.0, 405.0, 420.0, 415.0]      # what alice's last runs of it took: up to 7 min


@pytest.fixture(scope="module")
def advise_daemon(cluster):
    # not under pytest's 0700 tmp root: the users' CLI must reach the socket, as on a site
    top = Path(tempfile.mkdtemp(prefix="hpd-one-answer-", dir="/tmp"))
    top.chmod(0o755)
    data_dir = top / "data"
    data_dir.mkdir(mode=0o755)
    server = Daemon(data_dir)
    server.env["HPCPREDICT_POLICY_MODE"] = "advise"
    server.start()
    try:
        cluster.set_hook_socket(server.hook_socket)
        yield server
    finally:
        cluster.set_hook_socket(cluster.daemon.hook_socket)
        server.stop()
        shutil.rmtree(top, ignore_errors=True)


def as_user(daemon, cluster, user: str, *argv: str) -> subprocess.CompletedProcess:
    """The real CLI as ``user`` (runuser), on the test daemon's socket and data dir."""
    env = [f"{key}={value}" for key, value in daemon.cli_env().items()
           if key.startswith(("HPCPREDICT_", "SLURM_CONF", "PATH"))]
    return subprocess.run(["runuser", "-u", user, "--", "env", *env, "HOME=/tmp", str(VENV_BIN / "hpcpredict"),
                           "--socket", daemon.hook_socket, *argv], cwd=cluster.jobs, capture_output=True, text=True,
                          timeout=120)


def suggested(text: str, pattern: str) -> str:
    match = re.search(pattern, text)
    assert match, text
    return match.group(1)


def test_one_suggestion_from_sbatch_to_report_and_own_records_only(cluster, advise_daemon):
    daemon = advise_daemon
    poll(lambda: squeue_empty(cluster), 300, "an empty queue")
    store = daemon.data_dir / "hpcpredict.sqlite"
    assert os.stat(store).st_mode & 0o077 == 0          # a user cannot open it (the finding)
    seed(daemon, "alice", "onea", SCRIPT, RUNS)
    cluster.write_script("onea.sh", SCRIPT)

    asked = as_user(daemon, cluster, "alice", "predict", "onea.sh", "-t", "5", "-p", "debug", "-A", "research")
    assert asked.returncode == 0, asked.stderr
    from_predict = suggested(asked.stdout, r"Suggested --time:\s+(\S+)")

    job_id, _, stderr, _ = cluster.sbatch("alice", "-t", "5", "-A", "research", "-p", "debug",
                                          "-o", "onea-%j.out", "onea.sh")
    line = next(text for text in stderr.splitlines() if text.startswith("sbatch: hpcpredict:"))
    from_sbatch = suggested(line, r"suggested --time=(\S+) \(advice only")
    bob_job, _, _, _ = cluster.sbatch("bob", "-t", "5", "-o", "/dev/null", "--wrap", "sleep 1")
    cluster.wait_done(job_id)
    cluster.wait_done(bob_job)
    output = (cluster.jobs / f"onea-{job_id}.out").read_text()
    from_output = suggested(output, r"suggested --time=(\S+) for the next run like this one")

    def explained():
        done = as_user(daemon, cluster, "alice", "explain", job_id, "--json")
        assert done.returncode == 0, done.stderr      # through the daemon: she cannot open the store
        result = json.loads(done.stdout)
        ready = result["job"] and result["job"]["source"] == "outcome" and \
            any(p["stage"] == "allocation" for p in result["predictions"])
        return result if ready else None
    result = poll(explained, 120, f"the outcome of job {job_id} in the store", 1.0)
    assert result["job"]["user"] == "alice"
    text = as_user(daemon, cluster, "alice", "explain", job_id)
    assert text.returncode == 0, text.stderr
    from_explain = suggested(text.stdout, r"suggested --time=(\S+) \(as the sbatch line said\)")
    assert f"suggested --time={from_explain} (as the job output said)" in text.stdout, text.stdout

    report = as_user(daemon, cluster, "alice", "report", "--json")
    assert report.returncode == 0, report.stderr
    [row] = json.loads(report.stdout)["rows"]
    assert row["user"] == "alice" and row["suggested_basis"] == f"job {job_id}'s, as suggested at its submission"
    shown = as_user(daemon, cluster, "alice", "report")
    assert shown.returncode == 0, shown.stderr
    table = shown.stdout.splitlines()
    column = table[0].split().index("suggested_time")
    from_report = next(line.split() for line in table if line.startswith("alice"))[column + 1]

    print(line, output, text.stdout, shown.stdout, sep="\n")      # what alice read (pytest -rP)
    assert from_sbatch == from_output == from_explain == from_report == from_predict, \
        (from_sbatch, from_output, from_explain, from_report, from_predict)
    # what her runs needed: above her 5-minute request (a request below the runs is never kept)
    assert from_sbatch == "00:07:00"

    refused = as_user(daemon, cluster, "alice", "explain", bob_job)
    assert refused.returncode != 0 and f"job {bob_job} is another user's" in refused.stderr, refused.stderr
    refused = as_user(daemon, cluster, "alice", "report", "--user", "bob")
    assert refused.returncode != 0 and "you (alice) may only report on your own jobs" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    # bob's own record is his to read
    assert as_user(daemon, cluster, "bob", "explain", bob_job).returncode == 0
