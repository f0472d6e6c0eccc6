"""End to end on a real Slurm cluster: job_submit.lua, PrologSlurmctld, TaskProlog,
EpilogSlurmctld and `hpcpredict refresh` against a real hpcpredictd (see conftest.py).

Tests run in file order and share one cluster: the policy tests submit jobs, the fail-open
tests break the daemon three ways, the outcome test waits for the jobs of the earlier tests,
the refresh test retrains on them.
"""
from __future__ import annotations

import base64
import json
import math
import re
import subprocess
import time

import pytest

from hpcpredict.slurm_plugin import slurmjob

from .harness import FakeHookServer, poll

JOB_SCRIPT = """#!/bin/bash
#SBATCH -N 4
#SBATCH -n 8
#SBATCH -J hello-mpi
#HPCPREDICT size=64
srun ./hello.sh --steps 10
"""
SUBMITTED: dict[str, str] = {}       # name -> job id, for the outcome and refresh tests


def store(daemon):
    from hpcpredict.daemon.store import SQLiteStore

    return SQLiteStore(str(daemon.data_dir / "hpcpredict.sqlite"))


def prediction(daemon, prediction_id: str, wait_s: float = 10.0):
    """The stored row, read from the store file as an admin tool would: the daemon commits its
    prediction journal in batches (every ~50 ms), so a row just answered may take that long."""
    deadline = time.monotonic() + wait_s
    while True:
        db = store(daemon)
        try:
            row = db.prediction(prediction_id)
        finally:
            db.close()
        if row is not None or time.monotonic() > deadline:
            return row
        time.sleep(0.05)


def seed_history(daemon, user: str, script: str, runtimes: list[float], ago_s: int = 3600) -> None:
    """Earlier runs of the same job (the first ``ago_s`` seconds ago), reported the way the
    epilog reports them."""
    now = int(time.time())
    for index, runtime in enumerate(runtimes):
        request = {"job": {"user": user, "job_name": "hello-mpi", "account": "research", "partition": "debug"},
                   "resources": {"nodes": 4, "ntasks": 8}, "time_limit_s": 600,
                   "script": base64.b64encode(script.encode()).decode()}
        ack = daemon.call("ReportOutcome", {"job_id": f"seed-{user}-{ago_s}-{index}", "state": "COMPLETED",
                                            "start_time": now - ago_s + index * 10,
                                            "end_time": now - ago_s + index * 10 + int(runtime),
                                            "elapsed_s": runtime, "request": request})
        assert ack["stored"] is True


@pytest.fixture(scope="module")
def timeout_job(cluster):
    """A job that will hit its 1-minute limit; submitted first so it ends during the other tests."""
    job_id, _, _, _ = cluster.sbatch("bob", "-J", "sleeper", "-N", "1", "-t", "1", "-o", "/dev/null",
                                     "--wrap", "sleep 300")
    SUBMITTED["timeout"] = job_id
    return job_id


def test_multinode_job_with_time_gets_time_min_and_allocation_suggestion(cluster, daemon, timeout_job, walltime_model):
    seed_history(daemon, "alice", JOB_SCRIPT, [90.0, 100.0, 95.0])
    cluster.write_script("hello-mpi.sh", JOB_SCRIPT)
    job_id, _, stderr, _ = cluster.sbatch("alice", "-t", "10", "-o", "hello-%j.out", "hello-mpi.sh")
    SUBMITTED["alice"] = job_id

    # the hook's one line on sbatch's stderr
    line = next(text for text in stderr.splitlines() if text.startswith("sbatch: hpcpredict:"))
    submit_id = re.search(r"\[([0-9a-f]{32})\]$", line).group(1)
    row = prediction(daemon, submit_id)
    assert row is not None and row.stage == "submit" and row.user == "alice" and not row.fallback
    assert "set --time-min=00:05:00" in line and "otherwise your --time=00:10:00 holds" in line

    # policy: --time kept, time_min = the walltime model's bound at the site's risk (minutes,
    # rounded up, at least the 5-minute floor), never the point estimate
    assert "walltime" in row.model_name and row.policy_reason == "time_min", (row.model_name, row.policy_reason)
    job = cluster.job(job_id)
    assert job["TimeLimit"] == "00:10:00"
    assert job["TimeMin"] == f"00:{max(5, math.ceil(row.bound_s / 60)):02d}:00"
    assert slurmjob.our_field(job["AdminComment"]).startswith(f"hpcpredict={submit_id};time_min=auto")

    cluster.wait_done(job_id)
    output = (cluster.jobs / f"hello-{job_id}.out").read_text()
    advice = [text for text in output.splitlines() if text.startswith("[hpcpredict] predicted runtime")]
    assert len(advice) == 1, output
    assert not re.search(r"\w=", advice[0]), advice[0]   # plain words, no debug fields
    field = slurmjob.our_field(cluster.job(job_id)["AdminComment"])
    refined = prediction(daemon, re.search(r";alloc=([\w-]+)", field).group(1))
    # the suggestion comes from the allocation-time estimate, on the nodes Slurm chose
    assert refined.stage == "allocation" and refined.job_id == job_id
    assert float(re.search(r";runtime_s=([\d.]+)", field).group(1)) == pytest.approx(refined.runtime_s, abs=0.5)
    assert advice[0].startswith(f"[hpcpredict] predicted runtime {slurmjob.human(refined.runtime_s)}")
    assert re.search(r"on n\[?\d", advice[0])
    # the limit the job has, not "you requested": 0:10:00, or 0:05:00 when backfill started it
    # on its --time-min (it does when the main scheduler's pass comes later: timing decides)
    limit = slurmjob.slurm_minutes(slurmjob.slurm_duration_s(cluster.job(job_id)["TimeLimit"]))
    assert limit in ("0:10:00", "0:05:00")
    assert f"time limit {limit} (hpcpredict set --time-min=0:05:00: backfill may lower --time" in output
    assert output.count("rank ") == 8  # the application itself ran on all ranks


def test_job_without_time_gets_limit_from_bound(cluster, daemon, walltime_model):
    script = "#!/bin/bash\nsrun ./hello.sh --steps 3\n"
    seed_history(daemon, "bob", script, [400.0, 420.0, 410.0])
    cluster.write_script("notime.sh", script)
    job_id, _, stderr, _ = cluster.sbatch("bob", "-N", "2", "-J", "notime", "-o", "/dev/null", "notime.sh")
    SUBMITTED["bob"] = job_id
    line = next(text for text in stderr.splitlines() if text.startswith("sbatch: hpcpredict:"))
    assert "no --time given, set --time=" in line
    submit_id = re.search(r"\[([0-9a-f]{32})\]$", line).group(1)
    row = prediction(daemon, submit_id)
    job = cluster.job(job_id)
    minutes = max(5, math.ceil(row.bound_s / 60))
    assert job["TimeLimit"] == f"{minutes // 60:02d}:{minutes % 60:02d}:00"
    assert job["TimeMin"] == "N/A"
    assert ";limit=auto" in job["AdminComment"]


def test_prolog_lowers_an_automatic_limit_with_the_refined_bound(cluster, daemon, walltime_model):
    """Site option prolog_adjust_time_limit: carol's history at submission says about 35 min
    (the hook sets that bound as the limit); shorter runs arrive while the job is held; at
    allocation the refined bound is lower and PrologSlurmctld lowers the limit the hook set."""
    script = "#!/bin/bash\nsrun ./hello.sh --steps 1\n"
    seed_history(daemon, "carol", script, [2000.0, 2100.0, 2050.0], ago_s=20000)
    cluster.write_script("carol.sh", script)
    job_id, _, stderr, _ = cluster.sbatch("carol", "--hold", "-N", "1", "-o", "/dev/null", "carol.sh")
    assert "no --time given, set --time=" in stderr
    submitted_limit = slurmjob.slurm_duration_s(cluster.job(job_id)["TimeLimit"])
    seed_history(daemon, "carol", script, [20.0, 25.0, 22.0] * 7)
    cluster.set_hook_setting("prolog_adjust_time_limit", "true")
    try:
        subprocess.run(["scontrol", "release", job_id], env=cluster.env(), check=True, timeout=10)
        poll(lambda: f"prolog_slurmctld job {job_id}: refined" in cluster.hooks_log(), 30, "the prolog")
    finally:
        cluster.set_hook_setting("prolog_adjust_time_limit", "false")
    refined = prediction(daemon, re.search(r";alloc=(\w+)", cluster.job(job_id)["AdminComment"]).group(1))
    assert refined.stage == "allocation" and not refined.fallback
    limit = slurmjob.slurm_duration_s(cluster.job(job_id)["TimeLimit"])
    # the refined bound (rounded up to whole minutes, at least the site's minimum limit)
    assert refined.bound_s <= limit < submitted_limit
    # the daemon decided it (daemon/policy/allocation.py) and stored it beside what the prolog read back
    assert (refined.policy_reason, refined.decided_time_limit_s) == ("allocation_time_limit", limit)
    assert (refined.started_time_limit_s, refined.started_time_min_s) == (submitted_limit, None)


def test_bound_mode_sets_no_limit_from_recent_runs_alone(cluster, daemon, walltime_model):
    """#31's production failure: a request 4x from all the user's earlier ones (carol's ran at
    --time=10 or less; this one asks 10 hours) is new to the walltime model; the user's recent
    runs answer, and their bound (1.1 x a quantile of the last runs) is no promise (replayed on
    KTH-SP2 on 22.05 semantics it killed 79 of the 308 jobs it shortened at 3 % risk). Bound
    mode sets no limit from it and says so; the job keeps what was submitted."""
    script = "#!/bin/bash\nsrun ./hello.sh --steps 2\n"
    seed_history(daemon, "carol", script, [100.0, 110.0, 105.0])
    cluster.write_script("carol-long.sh", script)
    job_id, _, stderr, _ = cluster.sbatch("carol", "-N", "1", "-t", "600", "-o", "/dev/null", "carol-long.sh")
    line = next(text for text in stderr.splitlines() if text.startswith("sbatch: hpcpredict:"))
    # (the range: carol's recent runs of hello.sh, these and test_prolog_...'s)
    assert "range of recent runs); kept your --time=10:00:00, set no --time-min: no calibrated runtime bound " \
           "at 3% risk for this job yet [" in line, line
    row = prediction(daemon, re.search(r"\[([0-9a-f]{32})\]$", line).group(1))
    assert (row.model_name, row.fallback, row.policy_mode, row.policy_reason) == \
        ("recent-history", False, "bound", "bound_not_calibrated")
    assert (row.decided_time_min_s, row.decided_time_limit_s) == (None, None)
    job = cluster.job(job_id)
    assert (job["TimeLimit"], job["TimeMin"]) == ("10:00:00", "N/A")
    assert "time_min=" not in slurmjob.our_field(job["AdminComment"])

    def explained():
        done = daemon.cli("explain", job_id)
        return done.stdout if done.returncode == 0 and "Prediction at submit" in done.stdout else None
    text = poll(explained, 60, f"an explanation of job {job_id}", 1.0)
    assert "decided: nothing (bound not calibrated) [bound mode]" in text, text
    cluster.wait_done(job_id)


def test_latin1_script_and_interactive_srun(cluster):
    # a script with Latin-1 bytes, a NUL-free control character and a very long line still
    # gets a prediction (the hook cleans it into valid UTF-8 / base64)
    script = b"#!/bin/bash\n# Auteur: Andr\xe9 \x01\n#HPCPREDICT size=8\nexport X=" + b"y" * 5000 + b"\nsrun ./hello.sh\n"
    (cluster.jobs / "latin1.sh").write_bytes(script)
    job_id, _, stderr, _ = cluster.sbatch("bob", "-N", "1", "-t", "3", "-o", "/dev/null", "latin1.sh")
    assert "sbatch: hpcpredict: predicted runtime" in stderr
    assert slurmjob.our_field(cluster.job(job_id)["AdminComment"]).startswith("hpcpredict=")
    # srun without a batch script: the hook leaves it alone (no script to read)
    done = subprocess.run(["runuser", "-u", "alice", "--", "env", f"SLURM_CONF={cluster.conf}", "srun", "-N", "1",
                           "-t", "2", "true"], cwd=cluster.jobs, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "hpcpredict" not in done.stderr


def outcomes_reported(cluster, job_ids) -> bool:
    """Whether EpilogSlurmctld logged a stored outcome for every job of ``job_ids``."""
    log = cluster.hooks_log()
    return all(re.search(rf"epilog_slurmctld job {job_id}: outcome [A-Z]+ ", log) for job_id in job_ids)


@pytest.mark.parametrize("failure", ["stopped", "hung", "garbage"])
def test_fail_open_leaves_job_unchanged(cluster, daemon, failure, tmp_path):
    # The earlier tests' jobs must not end while the hooks point elsewhere: their epilogs would
    # report to the fake (retrying on the path they read at start) and their outcomes, which
    # test_outcomes_are_stored checks, would be lost. Under load bob's job ended in that window.
    poll(lambda: outcomes_reported(cluster, SUBMITTED.values()), 180,
         f"the outcomes of jobs {sorted(SUBMITTED.values())}")
    fake = None
    if failure == "stopped":
        daemon.stop()
    else:
        fake = FakeHookServer(str(tmp_path / f"{failure}.sock"), failure)
        cluster.set_hook_socket(fake.path)
    try:
        job_id, _, stderr, took = cluster.sbatch("alice", "-N", "2", "-t", "7", "-J", f"failopen-{failure}",
                                                 "-o", "/dev/null", "--wrap", "sleep 1")
        job = cluster.job(job_id)
    finally:
        if fake is not None:
            fake.close()
            cluster.set_hook_socket(daemon.hook_socket)
        else:
            daemon.start()
    # A hang check, not a benchmark: the hook's budget is 0.3 s; without it sbatch would wait
    # for slurmctld's own RPC timeout (tens of seconds).
    assert took < 5.0
    assert "hpcpredict:" not in stderr
    assert job["TimeLimit"] == "00:07:00" and job["TimeMin"] == "N/A"
    # no submission-time prediction (PrologSlurmctld may add an allocation-time one later,
    # once the daemon answers again)
    assert not re.search(r"hpcpredict=\w", job.get("AdminComment", ""))
    if fake is not None:
        assert fake.accepted >= 1
    reason = {"stopped": "No such file or directory", "hung": "no answer within 300 ms",
              "garbage": "bad reply"}[failure]
    log = poll(lambda: [l for l in cluster.ctld_log().splitlines() if "fail-open" in l and reason in l],
               10, "the fail-open line in slurmctld.log")
    assert log


def test_outcomes_are_stored(cluster, daemon):
    failing, _, _, _ = cluster.sbatch("alice", "-N", "1", "-t", "5", "-J", "failing", "-o", "/dev/null",
                                      "--wrap", "sleep 1; exit 3")
    expected = {SUBMITTED["alice"]: "COMPLETED", SUBMITTED["bob"]: "COMPLETED", failing: "FAILED",
                SUBMITTED["timeout"]: "TIMEOUT"}

    def stored():
        db = store(daemon)
        try:
            found = {r.job_id: r for r in db.iter_jobs() if r.job_id in expected}
        finally:
            db.close()
        return found if len(found) == len(expected) else None

    found = poll(stored, 150, f"outcomes of jobs {sorted(expected)}", 1.0)
    for job_id, state in expected.items():
        assert found[job_id].state == state, (job_id, found[job_id])
    alice = found[SUBMITTED["alice"]]
    assert alice.user == "alice" and alice.application == "hello.sh" and alice.nodes == 4
    assert 1 <= alice.runtime_s < 120
    assert found[SUBMITTED["timeout"]].runtime_s >= 60
    assert found[failing].exit_code == 3
    assert "outcome TIMEOUT" in cluster.hooks_log()


def test_explain_and_report_on_jobs_run_on_the_cluster(cluster, daemon):
    """`hpcpredict explain` / `report` on jobs that went through the real hooks: the prediction
    made at submission (and at allocation), the job's real end, its error; alice's row."""
    job_id = SUBMITTED["alice"]

    def explained():
        done = daemon.cli("explain", job_id, "--json")
        result = json.loads(done.stdout) if done.returncode == 0 else None
        return result if result and result["job"] and result["job"]["source"] == "outcome" else None

    result = poll(explained, 150, f"an explanation of job {job_id} with its outcome", 1.0)
    assert result["job"]["user"] == "alice" and result["job"]["state"] == "COMPLETED"
    stages = {entry["stage"]: entry for entry in result["predictions"]}
    assert {"submit", "allocation"} <= set(stages), list(stages)
    # what the hook set at submission (test_multinode_...: --time-min=00:05:00), from the same policy
    assert stages["submit"]["set_time_min_s"] == 300 and stages["submit"]["inputs"]["time_limit_s"] == 600
    for entry in result["predictions"]:
        assert entry["model"] and entry["bound_s"] >= entry["runtime_s"] > 0
        assert 0 < entry["error"]["accuracy"] <= 1
    text = daemon.cli("explain", job_id)
    assert text.returncode == 0 and f"Job {job_id}" in text.stdout and "Prediction at submit" in text.stdout
    report = daemon.cli("report", "--json", "--user", "alice")
    assert report.returncode == 0, report.stderr
    [row] = json.loads(report.stdout)["rows"]
    assert row["user"] == "alice" and row["jobs"] >= 1 and row["predicted"] >= 1


def test_refresh_publishes_a_model_the_daemon_serves(cluster, daemon):
    before = daemon.cli("status", "--json")
    assert before.returncode == 0, before.stderr
    versions_before = {(m["kind"], m["key"]): m["version"] for m in json.loads(before.stdout).get("models", [])}
    done = daemon.cli("refresh", "--since", "now-1hours", "--json", timeout=240)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["finished_jobs"] >= 5
    # Slurm 22.05 has no pyslurm (PyPI: 25.11 only): auto reads the real sacct --json and says why.
    assert result["accounting"]["source"] == "sacct" and "pyslurm" in result["accounting"]["reason"]
    assert result["added"] + result["already_present"] == result["finished_jobs"]
    served = {(m["kind"], m["key"]): m["version"] for m in result["serving"]}
    assert served[(result["kind"], "_site")] == result["version"]
    assert versions_before.get((result["kind"], "_site")) != result["version"]
    after = json.loads(daemon.cli("status", "--json").stdout)
    assert any(m["kind"] == result["kind"] and m["version"] == result["version"] for m in after["models"])
