"""A window of the KTH-SP2 trace replayed on a real Slurm test cluster, time-compressed, with
and without hpcpredict: wait, bounded slowdown and kills per policy, as the release really
schedules and enforces them (``--slurm 22.05``: tests/slurm's cluster; ``--slurm 24.11`` and
``--slurm 26.05``: the 24.11.5 and 26.05.5 ones of slurm-in-root.sh, with
SchedulerParameters=time_min_as_soft_limit).

The window (``--jobs`` consecutive jobs from ``--start``, by submission) is submitted through the
real ``job_submit.lua`` to the cluster (real slurmctld with sched/backfill, ``--nodes`` emulated
nodes of ``--cpus`` CPUs shared by CPU: 10 x 10 = KTH-SP2's 100 processors; each job asks
``-n`` its trace processors and is a ``sleep`` of its compressed runtime). Every trace time is
divided by ``--compress``; a request becomes whole minutes (Slurm's unit), rounded up, so short
requests grow to a minute. Before the window, the real hpcpredictd ingests the earlier part of the
trace (the same compression and rounding, users named ``kth<uid>``) and trains, as a site would;
during the replay it learns from the outcomes the epilog reports. The hook's floor
(``min_time_limit_s``) is one minute here (the site default, 5 minutes, would be hours of trace
time) and its budget 2 s (this measures the policy, not the hook's latency: see the ``slurm`` area).

Policies (``--policies``): ``hpcpredict@RISK`` (the hook on, the daemon in ``[policy] mode =
"bound"``, asking for that risk target: kill limits, the 22.05 default), ``hpcpredict-soft`` (the
daemon in soft mode, reading the controller's live ``scontrol show config``: a soft --time-min;
the 24.11 default with ``user``) and ``user`` (the hook off: the requests as given). Each
``hpcpredict`` run gets a fresh daemon that ingests and trains on the history only, so it never
learns the window before predicting it.
A run stops ``--drain`` seconds after its last submission: jobs still pending then are cancelled
and count with their wait so far (``unfinished``). Times are reported in trace seconds
(measured x ``--compress``; Slurm's timestamps have 1 s resolution, i.e. ``--compress`` trace
seconds); bounded slowdown with tau = 10 trace seconds. ``killed``: jobs that ended TIMEOUT under
a limit below their request (a limit the policy set). ``simulator`` (``--simulator on``, the
default; ``only``: no cluster, no root): the simulator's prediction for the same window, policies
``user`` and ``hpcpredict-soft`` (see :func:`simulate_window`). Holds the release's test-cluster lock
(``/tmp/hpcpredict-slurm-test.lock``, ``/tmp/hpcpredict-slurm-2411-test.lock``, ``-2605-``) for the whole
run, as tests/slurm/conftest.py does.

    sudo .venv/bin/python -m benchmarks run slurm_replay [--slurm 22.05|24.11|26.05] [--jobs 150] [--start 18940]
        [--compress 60] [--drain 120] [--policies hpcpredict@0.03,hpcpredict@0.2,user] [--simulator on|off|only]
"""
from __future__ import annotations

import argparse
import csv
import fcntl
import math
import os
import re
import subprocess
import tempfile
import time
from functools import partial
from pathlib import Path

DESCRIPTION = "KTH-SP2 window replayed on the real Slurm test cluster, time-compressed, with/without hpcpredict"

TRACE = Path(__file__).resolve().parents[2] / "tests" / "data" / "traces" / "KTH-SP2.swf"
JOB_NAME = "kth-replay"
SLEEPER = "#!/bin/bash\n# a trace job: sleeps its compressed runtime\nsleep \"$1\"\n"
TAU_S = 10.0
POLICIES = ("hpcpredict@0.03", "hpcpredict@0.2", "user")
# The hook's floor is a minute (the site default, 5 minutes, would be hours of trace time) and its
# budget 2 s (this measures the policy, not the hook's latency); on/off per policy.
HOOK_SETTINGS = {"budget_s": "2", "min_time_limit_s": "60", "enabled": "false"}


def minutes(seconds: float) -> int:
    """A compressed request in Slurm's unit: whole minutes, rounded up, at least one."""
    return max(1, math.ceil(seconds / 60.0 - 1e-9))


def select_window(records, start: int, jobs: int):
    """(history, window): the window's jobs, and the jobs that ended before its first submission."""
    from hpcpredict.daemon.lab.history import end_time, scorable

    ordered = sorted(scorable(records), key=lambda r: r.submit_time)
    window = ordered[start:start + jobs]
    if not window:
        raise SystemExit(f"slurm_replay: no job at --start {start} (the trace has {len(ordered)})")
    first = window[0].submit_time
    history = [r for r in ordered[:start] if end_time(r) <= first]
    return history, window


def write_history_csv(history, path: Path, origin: float, first: float, compress: float) -> None:
    """The history compressed like the window (trace time ``first`` -> epoch ``origin``), as a
    sacct-like CSV with epoch timestamps: every job ended before ``origin``."""
    with open(path, "w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["job_id", "user", "submit_time", "start_time", "end_time", "run_time", "wallclock_req",
                      "processors_req", "state", "name"])
        for index, record in enumerate(history):
            submit = origin + (record.submit_time - first) / compress
            runtime = record.runtime_s / compress
            start = origin + (record.start_time - first) / compress if record.start_time >= 0 else submit
            out.writerow([f"h{index}", f"kth{record.user}", f"{submit:.3f}", f"{start:.3f}",
                          f"{start + runtime:.3f}", f"{runtime:.3f}",
                          minutes(record.requested_time_s / compress) * 60 if record.requested_time_s > 0 else "",
                          max(record.requested_procs, 1), "TIMEOUT" if record.censored else "COMPLETED", JOB_NAME])


def parse_jobcomp(path: Path, offset: int = 0) -> dict[str, dict]:
    """slurmctld's jobcomp/filetxt lines written after ``offset`` bytes, by job id."""
    rows = {}
    if not path.exists():
        return rows
    with open(path, "rb") as handle:
        handle.seek(offset)
        text = handle.read().decode("utf-8", "replace")
    for line in text.splitlines():
        fields = dict(re.findall(r"(\w+)=(\S*)", line))
        if "JobId" in fields:
            rows[fields["JobId"]] = fields
    return rows


def _epoch(text: str) -> float:
    from datetime import datetime
    if not text or text in ("Unknown", "None"):
        return -1.0
    return datetime.fromisoformat(text).timestamp()   # slurmctld prints local time


def score(submitted: list[dict], jobcomp: dict[str, dict], cut: float, compress: float, procs: int) -> dict:
    """Per-policy metrics in trace seconds from the jobs' Slurm records."""
    waits, slowdowns = [], []
    killed = killed_node_hours = unfinished = timeouts = 0
    busy = 0.0
    for job in submitted:
        row = jobcomp.get(job["job_id"], {})
        submit = _epoch(row.get("SubmitTime", "")) if row else job["submitted_at"]
        submit = submit if submit > 0 else job["submitted_at"]
        start, end = _epoch(row.get("StartTime", "")), _epoch(row.get("EndTime", ""))
        state = row.get("JobState", "")
        if start <= 0:          # never started: cancelled pending at the cut
            unfinished += 1
            waits.append(max(cut - submit, 0.0) * compress)
            continue
        if state not in ("COMPLETED", "TIMEOUT", "FAILED"):
            unfinished += 1
        wait = max(start - submit, 0.0) * compress
        run = max(end - start, 0.0) * compress if end > 0 else job["runtime_s"]
        waits.append(wait)
        slowdowns.append(max(1.0, (wait + run) / max(run, TAU_S)))
        busy += run * job["procs"]
        if state == "TIMEOUT":
            timeouts += 1
            if int(row.get("TimeLimit", "0") or 0) < job["limit_min"]:
                killed += 1
                killed_node_hours += run * job["procs"] / 3600.0
    span = (max(_epoch(jobcomp[j["job_id"]].get("EndTime", "")) for j in submitted if j["job_id"] in jobcomp)
            - min(j["submitted_at"] for j in submitted)) * compress if jobcomp else 0.0
    return {"n": len(submitted), "started": len(slowdowns), "unfinished": unfinished,
            "mean_wait_s": round(sum(waits) / len(waits), 1) if waits else None,
            "mean_bounded_slowdown": round(sum(slowdowns) / len(slowdowns), 3) if slowdowns else None,
            "utilization": round(busy / (span * procs), 4) if span > 0 else None,
            "killed": killed, "killed_node_hours": round(killed_node_hours, 2), "timeouts": timeouts,
            "shortened": sum(job["time_min_set"] for job in submitted),
            "time_limit_set": sum(job["time_limit_set"] for job in submitted),
            "fallback": sum(job["fallback"] for job in submitted)}


# The simulator's policy for each replay policy it models (daemon/lab/scheduling/policies.py).
SIMULATED = {"user": "user", "hpcpredict-soft": "hpcpredict-soft"}
BF_RESOLUTION_S = {"22.05": 60.0, "24.11": 10.0, "26.05": 10.0}     # the test clusters' bf_resolution (replay seconds)


def compressed(record, origin: float, compress: float, name: str):
    """``record`` as the replay submits it: times / ``compress`` from ``origin``, the request in
    whole minutes (rounded up), the user ``kth<uid>``."""
    import dataclasses

    def shift(value: float) -> float:
        return (value - origin) / compress if value >= 0 else value
    return dataclasses.replace(record, user=f"kth{record.user}", submit_time=shift(record.submit_time),
                               start_time=shift(record.start_time), end_time=shift(record.end_time),
                               runtime_s=record.runtime_s / compress, job_name=name,
                               requested_time_s=minutes(record.requested_time_s / compress) * 60.0
                               if record.requested_time_s > 0 else 0.0)


def simulate_window(history, window, compress: float, slurm: str, procs: int, policies) -> dict:
    """The simulator's prediction for the replayed window: the same compressed jobs on an empty
    machine of ``procs`` processors, EASY backfilling with the release's --time-min semantics
    (24.11: time_min_as_soft_limit on) and the cluster's bf_resolution, the model's online
    answers after the same history (daemon/lab/scheduling); metrics as :func:`score` reports them."""
    from hpcpredict.daemon.config import PolicyConfig
    from hpcpredict.daemon.lab.scheduling import (POLICIES as SIM_POLICIES, online_predictions, replay_facts,
                                                  sim_jobs, simulate)

    origin = min(r.submit_time for r in history + window)     # times stay >= 0 (unknown: -1)
    before = [compressed(r, origin, compress, JOB_NAME) for r in history]
    during = [compressed(r, origin, compress, JOB_NAME) for r in window]
    policy = PolicyConfig()      # the daemon's defaults, as the replay's daemons run
    workload = sim_jobs(during, procs)
    soft = slurm != "22.05"
    facts = replay_facts(slurm, soft, procs)      # the controller every policy is told
    # soft_risk: a soft --time-min plans with the runtime at [policy] soft_risk for the release's rule,
    # as the daemon answers
    answers = online_predictions(before + during, risk=policy.risk, soft_risk=policy.soft_risk_for(facts.rule))
    results = {}
    for policy in policies:
        if policy not in SIMULATED:
            continue
        chosen = SIM_POLICIES[SIMULATED[policy]]
        jobs = [chosen(job, answers.get(id(record)), facts) for job, record in zip(workload.jobs, workload.records)]
        outcomes = simulate(jobs, procs, BF_RESOLUTION_S[slurm], slurm, soft)
        waits = [(o.start_s - o.job.submit_s) * compress for o in outcomes]
        runs = [(o.end_s - o.start_s) * compress for o in outcomes]
        results[policy] = {
            "n": len(outcomes), "mean_wait_s": round(sum(waits) / len(waits), 1),
            "mean_bounded_slowdown": round(sum(max(1.0, (w + r) / max(r, TAU_S)) for w, r in zip(waits, runs))
                                           / len(outcomes), 3),
            "killed": sum(o.killed and o.limit_s < o.job.request_limit_s for o in outcomes),
            "shortened": sum(0 < job.time_min_s < job.limit_s or job.limit_s < before_job.limit_s
                             for job, before_job in zip(jobs, workload.jobs))}
    return results


def learn_history(daemon, history, first: float, compress: float, csv_path: Path) -> None:
    """``daemon`` ingests ``history`` (compressed, ending now: see :func:`write_history_csv`) and
    trains on it, as a site would before the window."""
    write_history_csv(history, csv_path, time.time() - 1.0, first, compress)
    csv_path.chmod(0o644)
    for step in (("ingest", "--format", "sacct-csv", str(csv_path)), ("train", "--json")):
        done = daemon.cli(*step, timeout=900)
        if done.returncode != 0:
            raise RuntimeError(f"hpcpredict {step[0]} failed: {done.stderr[-1000:]}")


class Cluster2205:
    """The 22.05 test cluster of tests/slurm (start-cluster.sh), clients run on the host."""

    release = "22.05"
    lock = "/tmp/hpcpredict-slurm-test.lock"
    policies = POLICIES

    def __init__(self, work: Path, nodes: int, cpus: int, users: list[str]):
        from tests.slurm import harness
        self.h, self.work = harness, work
        etc = harness.SLURM_DIR / "etc"
        self.jobs = harness.SLURM_DIR / "jobs"
        self.jobcomp = harness.SLURM_DIR / "log" / "jobcomp.txt"
        self.slurm_conf = str(etc / "slurm.conf")
        self.conf = {"hook_socket": str(work / "none.sock"), "slurm_conf": self.slurm_conf,
                     "log_file": str(harness.SLURM_DIR / "log" / "hpcpredict-hooks.log"), "outcome_wait_s": "5",
                     **HOOK_SETTINGS}
        staging = work / "hooks"
        staging.mkdir()
        harness.write_hooks_conf(staging / "hpcpredict-hooks.conf", self.conf)
        self.env = dict(harness.cluster_env(staging), ACCOUNTING="0", NODES=str(nodes), CPUS_PER_NODE=str(cpus),
                        TEST_USERS=" ".join(["alice", "bob", "carol", *users]))
        self.bump = 0

    def start(self) -> None:
        self.stop()
        started = subprocess.run([str(self.h.CLUSTER / "start-cluster.sh")], env=self.env, capture_output=True,
                                 text=True, timeout=300)
        if started.returncode != 0:
            raise RuntimeError(started.stdout[-2000:] + started.stderr[-2000:])

    def stop(self) -> None:
        subprocess.run([str(self.h.CLUSTER / "stop-cluster.sh")], env=self.env, capture_output=True, timeout=120)

    def run(self, *args: str, user: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
        prefix = ["runuser", "-u", user, "--"] if user else []
        return subprocess.run([*prefix, "env", f"SLURM_CONF={self.slurm_conf}", *args], cwd=self.jobs,
                              capture_output=True, text=True, timeout=timeout)

    def new_daemon(self, name: str, mode: str):
        """A fresh hpcpredictd in ``mode`` and its hook socket as the hooks reach it."""
        daemon = self.h.Daemon(self.work / f"daemon-{name}")
        daemon.env.update(HPCPREDICT_POLICY_MODE=mode, HPCPREDICT_POLICY_MIN_TIME_LIMIT_S="60")
        daemon.start()
        return daemon, daemon.hook_socket

    def configure(self, **changes) -> None:
        """Hook settings; a newer mtime makes slurmctld reload the script and its settings."""
        self.conf.update(changes)
        self.h.write_hooks_conf(self.h.SLURM_DIR / "etc" / "hpcpredict-hooks.conf", self.conf)
        self.bump += 1
        stamp = time.time() + self.bump
        os.utime(self.h.SLURM_DIR / "etc" / "job_submit.lua", (stamp, stamp))


class ClusterInRoot:
    """A test cluster of tests/slurm in a Debian root (slurm-in-root.sh: 24.11.5 in a trixie root,
    26.05.5 in a forky one, on Debian 12) with SchedulerParameters=time_min_as_soft_limit, nodes
    shared by CPU (OverSubscribe=NO, as on 22.05). Clients run in the root; every daemon lives
    under one host directory that the root sees at /run/hpcpredict, and reads the controller's
    live configuration through the root."""

    policies = ("hpcpredict-soft", "user")

    def __init__(self, release: str, work: Path, nodes: int, cpus: int, users: list[str]):
        from tests.slurm import harness, harness_root
        self.h, self.hr = harness, harness_root
        self.release = release
        self.slurm = harness_root.RELEASES[release]
        self.lock = self.slurm.lock
        self.daemons = work / "daemons"            # bind-mounted at the root's /run/hpcpredict
        self.daemons.mkdir()
        self.daemons.chmod(0o755)
        inner = self.slurm.slurm_dir
        self.conf = {"hook_socket": "/run/hpcpredict/none/hook.sock", "slurm_conf": f"{inner}/etc/slurm.conf",
                     "log_file": f"{inner}/log/hpcpredict-hooks.log", "outcome_wait_s": "0",   # no slurmdbd
                     **HOOK_SETTINGS}
        staging = work / "hooks"
        staging.mkdir()
        harness.write_hooks_conf(staging / "hpcpredict-hooks.conf", self.conf)
        self.env = dict(harness_root.script_env(self.slurm, None, staging / "hpcpredict-hooks.conf"),
                        DAEMON_DIR=str(self.daemons), NODES=str(nodes), CPUS=str(cpus), OVERSUBSCRIBE="NO",
                        TEST_USERS=" ".join(["alice", "bob", "carol", *users]))
        self.cluster = harness_root.RootCluster(self.slurm, None, self.conf, self.env["SCHED_PARAMS"])
        self.jobs = self.cluster.jobs
        self.jobcomp = self.cluster.dir / "log" / "jobcomp.txt"

    def start(self) -> None:
        self.stop()
        started = self.hr.run_script("start", self.env, timeout=1200)
        if started.returncode != 0:
            raise RuntimeError(started.stdout[-2000:] + started.stderr[-2000:])

    def stop(self) -> None:
        self.hr.run_script("stop", self.env, timeout=120)

    def run(self, *args: str, user: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
        return self.cluster.run(*args, user=user, cwd=f"{self.cluster.inner_dir}/jobs", timeout=timeout)

    def new_daemon(self, name: str, mode: str, env: dict | None = None):
        """``env``: more of the daemon's settings (they win over these)."""
        daemon = self.h.Daemon(self.daemons / name)
        daemon.env.update(HPCPREDICT_POLICY_MODE=mode, HPCPREDICT_POLICY_MIN_TIME_LIMIT_S="60",
                          HPCPREDICT_POLICY_CONTROLLER_CONFIG_COMMAND=" ".join(
                              self.cluster.command(["scontrol", "show", "config"])))
        daemon.env.update(env or {})
        daemon.start()
        (self.daemons / name).chmod(0o755)         # slurmctld (SlurmUser) reaches the socket through it
        return daemon, f"/run/hpcpredict/{name}/hook.sock"

    def configure(self, **changes) -> None:
        self.conf.update(changes)
        for key, value in changes.items():
            self.cluster.set_hook_setting(key, value)


CLUSTERS = {"22.05": Cluster2205, "24.11": partial(ClusterInRoot, "24.11"), "26.05": partial(ClusterInRoot, "26.05")}


def parse_policy(policy: str) -> tuple[str | None, float | None]:
    """(daemon mode, risk) of a policy name: ``user`` -> (None, None); ``hpcpredict@0.3`` ->
    ("bound", 0.3); ``hpcpredict-soft`` -> ("soft", None: the site's); ``hpcpredict-MODE@RISK``."""
    if policy == "user":
        return None, None
    match = re.fullmatch(r"hpcpredict(?:-(soft|bound|advise))?(?:@([0-9.]+))?", policy)
    if not match:
        raise SystemExit(f"slurm_replay: unknown policy {policy!r} (user, hpcpredict[-soft|-bound|-advise][@RISK])")
    return match.group(1) or "bound", float(match.group(2)) if match.group(2) else None


class Replay:
    def __init__(self, cluster):
        self.cluster = cluster

    def queue(self) -> list[str]:
        return self.cluster.run("squeue", "-h", "-n", JOB_NAME, "-o", "%i").stdout.split()

    def sbatch(self, user: str, args: list[str]) -> tuple[str, str]:
        done = self.cluster.run("sbatch", *args, user=user, timeout=120)
        match = re.search(r"Submitted batch job (\d+)", done.stdout)
        if done.returncode != 0 or not match:
            raise RuntimeError(f"sbatch failed: {done.stderr.strip()[-500:]}")
        return match.group(1), done.stderr

    def run(self, window, compress: float, drain_s: float, progress) -> tuple[list[dict], float]:
        submitted = self.submit(window, compress, progress)
        cut = time.time() + drain_s
        while time.time() < cut and self.queue():
            time.sleep(2.0)
        cut = time.time()
        left = self.queue()
        if left:
            self.cluster.run("scancel", *left, timeout=60)
            self.cluster.h.poll(lambda: not self.queue(), 120, "the cancelled replay jobs to go", 1.0)
        time.sleep(2.0)    # jobcomp lines are written as jobs end
        return submitted, cut

    def submit(self, window, compress: float, progress=None, on_submit=None) -> list[dict]:
        """The window's jobs at their compressed submission times; ``on_submit(job)`` right after each."""
        first = window[0].submit_time
        origin = time.time() + 2.0
        submitted = []
        for index, record in enumerate(window):
            due = origin + (record.submit_time - first) / compress
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            runtime = record.runtime_s / compress
            limit = minutes(record.requested_time_s / compress) if record.requested_time_s > 0 else None
            args = ["-J", JOB_NAME, "-n", str(max(record.requested_procs, 1)), "-o", "/dev/null"]
            if limit is not None:
                args += ["-t", str(limit)]
            submitted_at = time.time()
            job_id, stderr = self.sbatch(f"kth{record.user}", [*args, "sleeper.sh", f"{runtime:.2f}"])
            submitted.append({"job_id": job_id, "submitted_at": submitted_at, "procs": max(record.requested_procs, 1),
                              "runtime_s": record.runtime_s, "limit_min": limit or 0,
                              "time_min_set": "set --time-min=" in stderr, "time_limit_set": "set --time=" in stderr,
                              "fallback": "[no history yet]" in stderr, "late_s": round(submitted_at - due, 2)})
            if on_submit is not None:
                on_submit(submitted[-1])
            if progress and index % 25 == 0:
                progress(index, len(window))
        return submitted


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run slurm_replay", description=DESCRIPTION)
    parser.add_argument("--slurm", choices=sorted(CLUSTERS), default="22.05", help="the test cluster's Slurm release")
    parser.add_argument("--jobs", type=int, default=150, help="jobs in the replayed window")
    parser.add_argument("--start", type=int, default=18940,
                        help="index (by submission) of the window's first job; the default is a busy window")
    parser.add_argument("--compress", type=float, default=60.0, help="trace seconds per replay second")
    parser.add_argument("--drain", type=float, default=120.0, help="seconds a run may go on after its last submission")
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--cpus", type=int, default=10, help="CPUs per emulated node")
    parser.add_argument("--policies", default=None,
                        help=f"default: {','.join(POLICIES)} (22.05), {','.join(ClusterInRoot.policies)} (24.11, 26.05)")
    parser.add_argument("--simulator", choices=("on", "off", "only"), default="on",
                        help="also (on) or only (only: no cluster) the simulator's prediction for the window")
    options = parser.parse_args(args)
    from hpcpredict.daemon.lab.history import read_trace

    kind = CLUSTERS[options.slurm]
    default = POLICIES if options.slurm == "22.05" else ClusterInRoot.policies
    policies = (options.policies or ",".join(default)).split(",")
    modes = {policy: parse_policy(policy) for policy in policies}
    history, window = select_window(read_trace(TRACE), options.start, options.jobs)
    procs = options.nodes * options.cpus
    if options.simulator == "only":
        return {"trace": TRACE.name, "slurm": options.slurm, "window_start": options.start, "jobs": len(window),
                "compress": options.compress, "procs": procs,
                "simulator": simulate_window(history, window, options.compress, options.slurm, procs, policies)}
    if os.geteuid() != 0:
        raise SystemExit("benchmarks run slurm_replay: run as root (starts slurmctld/slurmd, submits as users)")
    users = sorted({f"kth{r.user}" for r in window})
    work = Path(tempfile.mkdtemp(prefix="hpcpredict-bench-replay-"))
    work.chmod(0o755)
    cluster = kind(work, options.nodes, options.cpus, users)
    lock = open(cluster.lock, "w")
    fcntl.flock(lock, fcntl.LOCK_EX)           # one test cluster of a release per machine
    daemon = None
    results: dict = {"trace": TRACE.name, "slurm": options.slurm, "window_start": options.start, "jobs": len(window),
                     "history_jobs": len(history), "users": len(users), "compress": options.compress,
                     "nodes": options.nodes, "cpus_per_node": options.cpus,
                     "window_trace_span_h": round((window[-1].submit_time - window[0].submit_time) / 3600, 2),
                     "hook": {"min_time_limit_s": 60, "budget_s": 2.0}, "policies": {}}
    try:
        cluster.start()
        if options.slurm != "22.05":
            results["scheduler_parameters"] = cluster.env["SCHED_PARAMS"]
        replay = Replay(cluster)
        (cluster.jobs / "sleeper.sh").write_text(SLEEPER)
        (cluster.jobs / "sleeper.sh").chmod(0o755)
        for policy in policies:
            mode, risk = modes[policy]
            if mode is not None:     # a fresh daemon that knows the history only
                if daemon is not None:
                    daemon.stop()
                name = re.sub(r"[^A-Za-z0-9.-]", "-", policy)
                daemon, socket_path = cluster.new_daemon(name, mode)
                learn_history(daemon, history, window[0].submit_time, options.compress, work / f"history-{name}.csv")
                cluster.configure(enabled="true", hook_socket=socket_path, risk=str(risk or 0))
            else:
                cluster.configure(enabled="false")
            cluster.h.poll(lambda: not replay.queue(), 120, "an empty queue", 1.0)
            began = time.time()
            offset = cluster.jobcomp.stat().st_size if cluster.jobcomp.exists() else 0
            submitted, cut = replay.run(window, options.compress, options.drain, None)
            scores = score(submitted, parse_jobcomp(cluster.jobcomp, offset), cut, options.compress, procs)
            scores["wall_s"] = round(time.time() - began, 1)
            scores["max_submit_late_s"] = max(job["late_s"] for job in submitted)
            if mode is not None:
                scores["mode"] = mode
            if risk is not None:
                scores["risk"] = risk
                scores["kills_allowed"] = round(risk * scores["shortened"], 1)
            results["policies"][policy] = scores
        user = results["policies"].get("user")
        for name, ours in results["policies"].items():
            if user and name != "user" and user["mean_bounded_slowdown"] and ours["mean_bounded_slowdown"]:
                ours["bsld_vs_user"] = round(ours["mean_bounded_slowdown"] / user["mean_bounded_slowdown"], 4)
                ours["wait_vs_user"] = round(ours["mean_wait_s"] / user["mean_wait_s"], 4) if user["mean_wait_s"] else None
    finally:
        try:
            cluster.run("scancel", "-n", JOB_NAME, timeout=60)
        finally:
            cluster.stop()
            if daemon is not None:
                daemon.stop()
            lock.close()
    if options.simulator == "on":
        results["simulator"] = simulate_window(history, window, options.compress, options.slurm, procs, policies)
    return results
