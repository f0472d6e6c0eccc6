"""The Slurm submit hook's cost on the real test cluster: sbatch latency with and without the
hook, and its worst cases (1 MiB script, hung daemon, bursts of 50 sbatch, with and without the
circuit breaker).

Uses the cluster of tests/slurm (tests/slurm/harness.py: same directory, ports and lock
``/tmp/hpcpredict-slurm-test.lock``, held for the whole run) with accounting off (it does not
touch the submit path), a real hpcpredictd, and a socket that accepts and never answers for the
hung daemon. Jobs are submitted by root with ``sbatch --hold`` (held jobs never run, so the
controller only does submission work). Each sample is the wall time of one ``sbatch`` process,
as a user sees it; the hook's own time is read from slurmctld.log (the hook logs it per job).

    sudo .venv/bin/python -m benchmarks run slurm [--samples 60] [--block 10] [--burst 50]
"""
from __future__ import annotations

import argparse
import fcntl
import os
import re
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

DESCRIPTION = "Slurm submit hook: sbatch latency with/without it, worst cases (1 MiB script, hung daemon, bursts, breaker)"

SCRIPT = """#!/bin/bash
#SBATCH -N 4
#SBATCH --ntasks-per-node=4
#SBATCH -J lmp-bench
#HPCPREDICT atoms=2048000
# a realistic-size job script (about 1 KB): modules, variables, the launch line
module load gcc/12 openmpi/4.1 lammps/2023
export OMP_NUM_THREADS=1
cd "$SLURM_SUBMIT_DIR"
""" + "".join(f"# padding line {i:02d} so the script is as long as a typical production one\n" for i in range(12)) + \
    'srun --mpi=pmix lmp -in in.lj -var nsteps 5000 -log lmp.log\n'


def _stats(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"n": len(values), "median_ms": round(statistics.median(values) * 1e3, 1), "p95_ms": round(p95 * 1e3, 1),
            "max_ms": round(ordered[-1] * 1e3, 1), "mean_ms": round(statistics.fmean(values) * 1e3, 1)}


class Bench:
    def __init__(self, harness, staging: Path, conf: dict):
        self.h = harness
        self.conf = conf
        self.etc_conf = harness.SLURM_DIR / "etc" / "hpcpredict-hooks.conf"
        self.lua = harness.SLURM_DIR / "etc" / "job_submit.lua"
        self.env = dict(os.environ, SLURM_CONF=str(harness.SLURM_DIR / "etc" / "slurm.conf"))
        self.jobs = harness.SLURM_DIR / "jobs"
        self.bump = 0

    def configure(self, **changes) -> None:
        """Change hook settings; bumping the script's mtime makes slurmctld reload it (which also
        resets the breaker, a global of the script's Lua state)."""
        self.conf.update(changes)
        self.h.write_hooks_conf(self.etc_conf, self.conf)
        self.bump += 1
        stamp = time.time() + self.bump
        os.utime(self.lua, (stamp, stamp))

    def sbatch(self, script: str = "bench.sh", check: bool = True) -> tuple[float, str]:
        """Wall time of one sbatch and its stderr; with ``check=False`` a failed sbatch (e.g.
        slurmctld did not answer within MessageTimeout) returns its time and "FAILED: ..."."""
        started = time.perf_counter()
        done = subprocess.run(["sbatch", "--hold", "-t", "30", "-o", "/dev/null", script], cwd=self.jobs,
                              env=self.env, capture_output=True, text=True, timeout=300)
        took = time.perf_counter() - started
        if done.returncode != 0:
            if check:
                raise RuntimeError(done.stderr)
            return took, "FAILED: " + done.stderr.strip().splitlines()[-1:][0] if done.stderr.strip() else "FAILED"
        return took, done.stderr

    def cancel(self) -> None:
        subprocess.run(["scancel", "-u", "root"], env=self.env, capture_output=True, timeout=60)

    def log_offset(self) -> int:
        return (self.h.SLURM_DIR / "log" / "slurmctld.log").stat().st_size

    def hook_ms_since(self, offset: int) -> dict:
        """The hook's own time per job (its log lines say "(N ms)") and the breaker skips."""
        with open(self.h.SLURM_DIR / "log" / "slurmctld.log", "rb") as handle:
            handle.seek(offset)
            text = handle.read().decode("utf-8", "replace")
        took = [float(m) for m in re.findall(r"lua: hpcpredict: .*?\((?:user \S+, \S+, )?([\d.]+) ms\)", text)]
        return {"calls_logged": len(took), "hook_max_ms": max(took, default=0.0),
                "hook_median_ms": statistics.median(took) if took else 0.0,
                "breaker_skips": text.count("breaker open after")}

    def burst(self, count: int, script: str) -> dict:
        offset = self.log_offset()
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=count) as pool:
            done = list(pool.map(lambda _: self.sbatch(script, check=False), range(count)))
        wall = time.perf_counter() - started
        # slurmctld keeps working through RPCs whose sbatch already gave up: wait until its log
        # is quiet, then count the jobs that exist (a "failed" sbatch may have created its job)
        size, quiet_since = -1, time.monotonic()
        while time.monotonic() - quiet_since < 3 and time.monotonic() - started < 120:
            time.sleep(0.5)
            if self.log_offset() != size:
                size, quiet_since = self.log_offset(), time.monotonic()
        created = subprocess.run(["squeue", "-h", "-u", "root", "-o", "%i"], env=self.env, capture_output=True,
                                 text=True, timeout=60).stdout.split()
        self.cancel()
        failed = [stderr for _, stderr in done if stderr.startswith("FAILED")]
        return {"wall_s": round(wall, 2), **_stats([t for t, _ in done]), "sbatch_failed": len(failed),
                "sbatch_errors": sorted(set(failed))[:3], "jobs_created": len(created),
                "controller_busy_s": round(time.monotonic() - started - 3, 1), **self.hook_ms_since(offset)}


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run slurm", description=DESCRIPTION)
    parser.add_argument("--samples", type=int, default=60, help="sbatch calls per condition for the latency A/B")
    parser.add_argument("--block", type=int, default=10, help="calls per block before switching condition")
    parser.add_argument("--big", type=int, default=10, help="sbatch calls per 1 MiB-script condition")
    parser.add_argument("--burst", type=int, default=50, help="concurrent sbatch per burst")
    options = parser.parse_args(args)
    if os.geteuid() != 0:
        raise SystemExit("benchmarks run slurm: run as root (starts slurmctld/slurmd)")
    from tests.slurm import harness

    lock = open("/tmp/hpcpredict-slurm-test.lock", "w")
    fcntl.flock(lock, fcntl.LOCK_EX)           # one test cluster per machine
    work = Path(tempfile.mkdtemp(prefix="hpcpredict-bench-slurm-"))
    work.chmod(0o755)
    daemon = harness.Daemon(work / "daemon")
    daemon.start()
    staging = work / "hooks"
    staging.mkdir()
    conf = {"hook_socket": daemon.hook_socket, "slurm_conf": str(harness.SLURM_DIR / "etc" / "slurm.conf"),
            "log_file": str(harness.SLURM_DIR / "log" / "hpcpredict-hooks.log"), "outcome_wait_s": "0",
            "budget_s": "0.3", "enabled": "false"}
    harness.write_hooks_conf(staging / "hpcpredict-hooks.conf", conf)
    cluster_env = dict(harness.cluster_env(staging), ACCOUNTING="0")
    subprocess.run([str(harness.CLUSTER / "stop-cluster.sh")], env=cluster_env, capture_output=True, timeout=120)
    started = subprocess.run([str(harness.CLUSTER / "start-cluster.sh")], env=cluster_env, capture_output=True,
                             text=True, timeout=300)
    if started.returncode != 0:
        raise RuntimeError(started.stdout[-2000:] + started.stderr[-2000:])
    bench = Bench(harness, staging, conf)
    (bench.jobs / "bench.sh").write_text(SCRIPT)
    big = SCRIPT + "".join(f"# filler {i:07d} {'x' * 100}\n" for i in range((1 << 20) // 118))
    (bench.jobs / "big.sh").write_text(big[: 1 << 20])
    hung = harness.FakeHookServer(str(work / "hung.sock"), "hang")
    results: dict = {"script_bytes": len(SCRIPT), "big_script_bytes": 1 << 20, "budget_s": 0.3,
                     "max_script_bytes": 65536, "breaker": {"failures": 3, "cooldown_s": 30}}
    try:
        # 1. sbatch latency, hook off (Slurm's Lua plugin loaded, hook disabled) vs on, interleaved
        samples: dict[str, list[float]] = {"off": [], "on": []}
        missed = 0
        for condition in ("off", "on"):                       # warm-up: Lua load, first daemon call
            bench.configure(enabled=str(condition == "on").lower())
            for _ in range(3):
                bench.sbatch()
        for index in range(2 * max(1, options.samples // options.block)):
            condition = ("off", "on")[index % 2]
            bench.configure(enabled=str(condition == "on").lower(), hook_socket=daemon.hook_socket)
            bench.sbatch()                                     # first call after a reload is not measured
            for _ in range(options.block):
                took, stderr = bench.sbatch(check=False)
                if stderr.startswith("FAILED"):
                    results.setdefault("latency_sbatch_failed", 0)
                    results["latency_sbatch_failed"] += 1
                    continue
                missed += condition == "on" and "hpcpredict:" not in stderr
                samples[condition].append(took)
            bench.cancel()
        results["latency"] = {name: _stats(values) for name, values in samples.items()}
        results["latency"]["delta_median_ms"] = round(
            results["latency"]["on"]["median_ms"] - results["latency"]["off"]["median_ms"], 1)
        results["latency"]["on_missed_budget"] = missed

        # 2. one 1 MiB script at a time: healthy daemon, hung daemon (breaker off)
        for name, socket_path in (("big_healthy", daemon.hook_socket), ("big_hung", hung.path)):
            bench.configure(enabled="true", hook_socket=socket_path, breaker_failures="0")
            bench.sbatch("big.sh", check=False)
            offset = bench.log_offset()
            done = [bench.sbatch("big.sh", check=False) for _ in range(options.big)]
            bench.cancel()
            results[name] = {**_stats([t for t, _ in done]), **bench.hook_ms_since(offset),
                             "sbatch_failed": sum(stderr.startswith("FAILED") for _, stderr in done)}

        # 3. bursts of concurrent sbatch (1 MiB scripts) against a hung daemon, breaker off / on
        for name, failures in (("burst_hung_no_breaker", "0"), ("burst_hung_breaker", "3")):
            bench.configure(enabled="true", hook_socket=hung.path, breaker_failures=failures)  # fresh breaker
            results[name] = bench.burst(options.burst, "big.sh")
        # the same burst against the healthy daemon, for scale
        bench.configure(enabled="true", hook_socket=daemon.hook_socket, breaker_failures="3")
        results["burst_healthy"] = bench.burst(options.burst, "big.sh")
    finally:
        hung.close()
        bench.cancel()
        subprocess.run([str(harness.CLUSTER / "stop-cluster.sh")], env=cluster_env, capture_output=True, timeout=120)
        daemon.stop()
        lock.close()
    return results
