"""The start-time forecast on a real Slurm 24.11 / 26.05 cluster (issue #41): a replayed window
where each job's forecast made at its submission is compared with its actual start and with
Slurm's own estimate (``squeue --start``) at the same moment.

The window is slurm_replay's (its cluster, its compression, its history and the real
``job_submit.lua``: ``--slurm 24.11`` or ``26.05`` with SchedulerParameters=time_min_as_soft_limit,
the daemon in soft mode, so the hook sets soft --time-min as it would): ``--jobs`` consecutive
KTH-SP2 jobs from ``--start`` on ``--nodes`` x ``--cpus`` CPUs, every trace time divided by
``--compress``, requests in whole minutes. The default window (80 jobs from 22,500, 5.4 trace hours
in 162 s at x120) is one where jobs wait on an empty machine: the simulator (users' limits, EASY)
has 23 of them waiting over 10 s, most windows of the trace none (the cluster starts empty). The
daemon is the real hpcpredictd with its forecast keeper reading the root's squeue every
``--interval`` seconds (the site default is 60: here the trace runs ``--compress`` times as fast);
its controller facts (release, planning rule, size) come from the root's ``scontrol`` through host
wrappers (harness_root.RootCluster.client_wrappers).

At each submission: the ``When`` answer is asked for until its snapshot was taken after the
submission (the first keeper refresh that saw the job; nothing is forced), then ``squeue --start``
for the job right away. Recorded: our median and 80 % interval, the snapshot's own StartTime
(``squeue_start_s``: Slurm's estimate in the very queue we forecast from), ``squeue --start``'s
estimate a moment later, and the forecast's all-at-limit start (``slurm_start_s``). A job already
running at that snapshot, or gone from the queue before any snapshot saw it, is counted apart
(``started_before_forecast``): nothing was left to forecast; the jobs that waited over 10 s are
also scored on their own (most others start at the scheduling pass after the snapshot). After the last submission the run waits (at most ``--drain`` s) for every job to start,
then cancels what is left; actual starts are slurmctld's jobcomp records (1 s resolution).

Errors are absolute, in replay seconds (the cluster's) and x ``--compress`` in trace seconds;
Slurm's estimates are scored over the jobs it gave one for (``N/A`` / none: counted). Holds the
release's test-cluster lock for the whole run.

    sudo .venv/bin/python -m benchmarks run forecast_cluster [--slurm 24.11|26.05] [--start 22500] [--jobs 80]
        [--compress 120] [--interval 2] [--drain 300]
"""
from __future__ import annotations

import argparse
import fcntl
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.areas.slurm_replay import (JOB_NAME, SLEEPER, TRACE, ClusterInRoot, Replay, _epoch, learn_history,
                                           parse_jobcomp, select_window)

DESCRIPTION = "start-time forecast at submission vs actual start and squeue --start, real Slurm 24.11/26.05 replay"

#: The planning rule of a running soft job each release's controller facts must give (daemon/policy/controller.py)
EXPECTED_RULE = {"24.11": "hard_end", "26.05": "soft_then_halfway"}


class Recorder(threading.Thread):
    """Asks ``When`` about each submitted job until a snapshot taken after its submission answers,
    then ``squeue --start`` about it; off the submitting thread, so submissions keep their times."""

    def __init__(self, daemon, cluster, timeout_s: float):
        super().__init__(name="forecast-recorder", daemon=True)
        self.daemon, self.cluster, self.timeout_s = daemon, cluster, timeout_s
        self.todo: list[dict] = []
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.records: dict[str, dict] = {}

    def add(self, job: dict) -> None:
        with self.lock:
            self.todo.append(job)

    def run(self) -> None:
        while True:
            with self.lock:
                todo = list(self.todo)
            if not todo and self.done.is_set():
                return
            for job in todo:
                record = self.ask(job)
                if record is not None:
                    self.records[job["job_id"]] = record
                    with self.lock:
                        self.todo.remove(job)
            time.sleep(0.2)

    def ask(self, job: dict) -> dict | None:
        """The job's record once a snapshot after its submission answers for it (or it left the
        queue before any did, or ``timeout_s`` passed); None: ask again."""
        from hpcpredict.slurm_plugin.hookclient import HookError
        try:
            answer = self.daemon.call("When", {"job_id": job["job_id"]})
        except HookError as error:          # not in the kept queue (yet, or any more)
            answer = {"error": str(error)}
        waited = time.time() - job["submitted_at"]
        if answer.get("snapshot_s", 0) < job["submitted_at"]:
            gone = not self.cluster.run("squeue", "-h", "-j", job["job_id"], "-o", "%i", timeout=30).stdout.strip()
            if not gone and waited < self.timeout_s:
                return None
            return {"answer": answer, "asked_after_s": round(waited, 2), "squeue_start": "",
                    "outcome": "ended_before_forecast" if gone else "timeout"}
        line = self.cluster.run("SLURM_TIME_FORMAT=%s", "squeue", "-h", "--start", "-j", job["job_id"],
                                "-o", "%i|%T|%S", timeout=30)
        return {"answer": answer, "asked_after_s": round(waited, 2), "squeue_start": line.stdout.strip(),
                "outcome": "answered"}


def squeue_start_epoch(line: str) -> float | None:
    """The StartTime of ``squeue -h --start -o %i|%T|%S`` under SLURM_TIME_FORMAT=%s (N/A: none)."""
    fields = line.split("|")
    if len(fields) != 3 or fields[1] != "PENDING" or not fields[2].strip().isdigit():
        return None
    return float(fields[2]) or None


def _mae(errors: list[float]) -> float | None:
    return round(statistics.mean(abs(e) for e in errors), 2) if errors else None


def score(submitted: list[dict], records: dict[str, dict], jobcomp: dict[str, dict], compress: float) -> dict:
    rows, rules = [], set()
    never_started = started_before = unanswered = 0
    for job in submitted:
        record = records.get(job["job_id"], {})
        answer = record.get("answer", {})
        if answer.get("planning_rule"):
            rules.add(answer["planning_rule"])
        start = _epoch(jobcomp.get(job["job_id"], {}).get("StartTime", ""))
        if start <= 0:
            never_started += 1
            continue
        if answer.get("state") == "RUNNING" or record.get("outcome") == "ended_before_forecast":
            started_before += 1      # started (and maybe ended) before the first snapshot that saw it
            continue
        if answer.get("state") != "PENDING" or answer.get("snapshot_s", 0) < job["submitted_at"]:
            unanswered += 1
            continue
        rows.append({"job_id": job["job_id"], "submitted_at": job["submitted_at"], "actual": start,
                     "wait_s": round(start - job["submitted_at"], 2), "snapshot_s": answer["snapshot_s"],
                     "median": answer["median_start_s"], "low80": answer["low80_start_s"],
                     "high80": answer["high80_start_s"], "slurm_at_limit": answer.get("slurm_start_s") or None,
                     "snapshot_squeue_start": answer.get("squeue_start_s") or None,
                     "squeue_start": squeue_start_epoch(record["squeue_start"]),
                     "asked_after_s": record["asked_after_s"]})

    def errors(key: str) -> list[float]:
        return [row[key] - row["actual"] for row in rows if row[key] is not None]
    ours, snap, later, at_limit = errors("median"), errors("snapshot_squeue_start"), errors("squeue_start"), \
        errors("slurm_at_limit")
    both = [row for row in rows if row["squeue_start"] is not None]
    covered = sum(row["low80"] - 1.0 <= row["actual"] <= row["high80"] + 1.0 for row in rows)   # 1 s: Slurm's clock
    summary = {
        "n_jobs": len(submitted), "n_forecast": len(rows), "started_before_forecast": started_before,
        "never_started": never_started, "unanswered": unanswered,
        "mean_wait_s": round(statistics.mean(row["wait_s"] for row in rows), 2) if rows else None,
        "mae_ours_s": _mae(ours), "mae_squeue_start_s": _mae(later), "n_squeue_start": len(later),
        "mae_ours_where_squeue_start_s": _mae([row["median"] - row["actual"] for row in both]),
        "mae_snapshot_starttime_s": _mae(snap), "n_snapshot_starttime": len(snap),
        "mae_all_at_limit_s": _mae(at_limit),
        "median_abs_ours_s": round(statistics.median(abs(e) for e in ours), 2) if ours else None,
        "median_abs_squeue_start_s": round(statistics.median(abs(e) for e in later), 2) if later else None,
        "bias_ours_s": round(statistics.mean(ours), 2) if ours else None,
        "bias_squeue_start_s": round(statistics.mean(later), 2) if later else None,
        "coverage80": round(covered / len(rows), 3) if rows else None,
        "asked_after_s_max": max((row["asked_after_s"] for row in rows), default=None),
        "planning_rules": sorted(rules)}
    # The jobs that really waited (over 10 s: five keeper intervals; most others start at the next
    # scheduling pass, which the snapshot precedes): ours and squeue --start's on the same jobs
    waited = [row for row in rows if row["wait_s"] > 10]
    summary["waited_over_10s"] = {
        "n": len(waited), "mae_ours_s": _mae([row["median"] - row["actual"] for row in waited]),
        "n_squeue_start": sum(row["squeue_start"] is not None for row in waited),
        "mae_ours_where_squeue_start_s": _mae([row["median"] - row["actual"] for row in waited
                                               if row["squeue_start"] is not None]),
        "mae_squeue_start_s": _mae([row["squeue_start"] - row["actual"] for row in waited
                                    if row["squeue_start"] is not None]),
        "coverage80": round(sum(row["low80"] - 1.0 <= row["actual"] <= row["high80"] + 1.0 for row in waited)
                            / len(waited), 3) if waited else None}
    summary["trace_seconds"] = {key[:-2] + "_trace_s" if key.endswith("_s") else key: round(value * compress)
                                for key, value in summary.items()
                                if key.startswith(("mae_", "median_abs_", "bias_", "mean_wait")) and value is not None}
    return {"summary": summary, "jobs": rows}


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run forecast_cluster", description=DESCRIPTION)
    parser.add_argument("--slurm", choices=sorted(EXPECTED_RULE), default="24.11")
    parser.add_argument("--start", type=int, default=22500, help="the window's first job (by submission)")
    parser.add_argument("--jobs", type=int, default=80)
    parser.add_argument("--compress", type=float, default=120.0, help="trace seconds per replay second")
    parser.add_argument("--interval", type=float, default=2.0, help="[forecast] interval_s of the daemon")
    parser.add_argument("--drain", type=float, default=300.0, help="seconds to wait after the window for every start")
    parser.add_argument("--nodes", type=int, default=10)
    parser.add_argument("--cpus", type=int, default=10)
    options = parser.parse_args(args)
    if os.geteuid() != 0:
        raise SystemExit("benchmarks run forecast_cluster: run as root (starts slurmctld/slurmd, submits as users)")
    from hpcpredict.daemon.lab.history import read_trace

    history, window = select_window(read_trace(TRACE), options.start, options.jobs)
    users = sorted({f"kth{r.user}" for r in window})
    work = Path(tempfile.mkdtemp(prefix="hpcpredict-bench-forecast-"))
    work.chmod(0o755)
    cluster = ClusterInRoot(options.slurm, work, options.nodes, options.cpus, users)
    lock = open(cluster.lock, "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    daemon = None
    results: dict = {"trace": TRACE.name, "slurm": options.slurm, "window_start": options.start, "jobs": len(window),
                     "history_jobs": len(history), "compress": options.compress, "interval_s": options.interval,
                     "nodes": options.nodes, "cpus_per_node": options.cpus,
                     "window_trace_span_h": round((window[-1].submit_time - window[0].submit_time) / 3600, 2)}
    try:
        cluster.start()
        results["scheduler_parameters"] = cluster.env["SCHED_PARAMS"]
        tools = cluster.cluster.client_wrappers(work / "bin")
        daemon, socket_path = cluster.new_daemon("forecast", "soft", {
            "HPCPREDICT_POLICY_CONTROLLER_CONFIG_COMMAND": f"{tools / 'scontrol'} show config",
            "HPCPREDICT_FORECAST_SQUEUE_COMMAND": str(tools / "squeue"),
            "HPCPREDICT_FORECAST_INTERVAL_S": str(options.interval)})
        learn_history(daemon, history, window[0].submit_time, options.compress, work / "history.csv")
        cluster.configure(enabled="true", hook_socket=socket_path, risk="0")
        (cluster.jobs / "sleeper.sh").write_text(SLEEPER)
        (cluster.jobs / "sleeper.sh").chmod(0o755)
        replay = Replay(cluster)
        offset = cluster.jobcomp.stat().st_size if cluster.jobcomp.exists() else 0
        recorder = Recorder(daemon, cluster, timeout_s=max(30.0, 10 * options.interval))
        recorder.start()
        submitted = replay.submit(window, options.compress, on_submit=recorder.add)
        recorder.done.set()
        recorder.join(timeout=120)
        cut = time.time() + options.drain
        while time.time() < cut and replay.cluster.run("squeue", "-h", "-n", JOB_NAME, "-t", "PD", "-o", "%i").stdout.split():
            time.sleep(2.0)
        left = replay.queue()
        results["pending_at_cut"] = len(cluster.run("squeue", "-h", "-n", JOB_NAME, "-t", "PD", "-o", "%i").stdout.split())
        if left:
            cluster.run("scancel", *left, timeout=60)
            cluster.h.poll(lambda: not replay.queue(), 120, "the cancelled jobs to go", 1.0)
        time.sleep(2.0)        # jobcomp lines are written as jobs end
        scored = score(submitted, recorder.records, parse_jobcomp(cluster.jobcomp, offset), options.compress)
        results.update(scored)
        results["expected_rule"] = EXPECTED_RULE[options.slurm]
        results["rule_ok"] = scored["summary"]["planning_rules"] == [EXPECTED_RULE[options.slurm]]
        results["soft_time_min_set"] = sum(job["time_min_set"] for job in submitted)
        results["max_submit_late_s"] = max(job["late_s"] for job in submitted)
        results["headline"] = {key: scored["summary"][key] for key in (
            "n_forecast", "mae_ours_s", "mae_ours_where_squeue_start_s", "mae_squeue_start_s", "n_squeue_start",
            "coverage80", "waited_over_10s", "planning_rules")}
    finally:
        try:
            cluster.run("scancel", "-n", JOB_NAME, timeout=60)
        finally:
            cluster.stop()
            if daemon is not None:
                daemon.stop()
            lock.close()
    return results

