#!/usr/bin/env python3
"""sbatch latency with and without hpcpredict's job_submit.lua, on the real test cluster.

One session: starts a real hpcpredictd and the single-host Slurm 22.05 cluster of
``tests/slurm/cluster`` (accounting off: it does not touch the submit path), then submits the
same 1 KB job script with ``sbatch --hold`` (held jobs never run, so the controller only does
submission work) in alternating blocks:

* ``off``  - job_submit.lua loaded but disabled (``enabled = false`` in hpcpredict-hooks.conf):
             the cost of Slurm's Lua plugin alone, i.e. the cluster without our hook;
* ``on``   - the hook asks the daemon over the hook socket and applies the policy;
* ``hung`` - the hook talks to a socket that accepts and never answers (fail-open budget).

Blocks alternate (off, on, off, on, ...) so drift on this shared machine hits both alike.
Each sample is the wall time of the whole ``sbatch`` process, as a user sees it. Writes
``results.json`` next to this file and prints the Markdown table for benchmarks/README.md.

    sudo .venv/bin/python benchmarks/slurm/sbatch_latency.py --samples 200 --block 20
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "tests" / "slurm" / "cluster"
PLUGIN = ROOT / "slurm_plugin"
SLURM_DIR = Path("/tmp/hpcpredict-slurm-bench")
PORTS = {"CTLD_PORT": "36817", "SLURMD_PORT_BASE": "37001", "DBD_PORT": "36819", "MYSQL_PORT": "33306"}

SCRIPT = """#!/bin/bash
#SBATCH -N 4
#SBATCH --ntasks-per-node=4
#SBATCH -J lmp-bench
#HPCPREDICT atoms=2048000
#HPCPREDICT steps=5000
# a realistic-size job script (about 1 KB): modules, variables, the launch line
module load gcc/12 openmpi/4.1 lammps/2023
export OMP_NUM_THREADS=1
export LMP_INPUT=in.lj
export NSTEPS=5000
cd "$SLURM_SUBMIT_DIR"
echo "starting on $SLURM_JOB_NODELIST"
""" + "".join(f"# padding line {i:02d} so the script is as long as a typical production one\n" for i in range(10)) + \
    """srun --mpi=pmix lmp -in "$LMP_INPUT" -var nsteps "$NSTEPS" -var atoms 2048000 -log lmp.log
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[index]


class Hung:
    def __init__(self, path: str):
        self.path = path
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(64)
        self.held = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            try:
                self.held.append(self.listener.accept()[0])
            except OSError:
                return

    def close(self):
        self.listener.close()
        for conn in self.held:
            conn.close()


def write_conf(path: Path, values: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(f"{k} = {v}\n" for k, v in values.items()))
    tmp.chmod(0o644)
    os.replace(tmp, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=200, help="sbatch calls per condition (on/off)")
    parser.add_argument("--block", type=int, default=20, help="calls per block before switching condition")
    parser.add_argument("--hung-samples", type=int, default=20)
    parser.add_argument("--nodes", default="8")
    parser.add_argument("--out", default=str(Path(__file__).with_name("results.json")))
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root (starts slurmctld/slurmd)")

    work = Path(tempfile.mkdtemp(prefix="hpcpredict-bench-"))
    work.chmod(0o755)
    daemon_env = dict(os.environ, HPCPREDICT_DATA_DIR=str(work / "daemon"), HPCPREDICT_DAEMON_METRICS="")
    (work / "daemon").mkdir()
    daemon = subprocess.Popen([str(Path(sys.executable).parent / "hpcpredictd")], env=daemon_env,
                              stdout=open(work / "daemon.log", "wb"), stderr=subprocess.STDOUT)
    hook_socket = work / "daemon" / "hook.sock"
    for _ in range(300):
        if hook_socket.exists():
            break
        time.sleep(0.1)
    staging = work / "hooks"
    staging.mkdir()
    conf_values = {"hook_socket": str(hook_socket), "slurm_conf": str(SLURM_DIR / "etc" / "slurm.conf"),
                   "log_file": str(SLURM_DIR / "log" / "hpcpredict-hooks.log"), "outcome_wait_s": "0",
                   "budget_s": "0.3", "enabled": "false"}
    write_conf(staging / "hpcpredict-hooks.conf", conf_values)
    cluster_env = dict(os.environ, SLURM_TEST_DIR=str(SLURM_DIR), NODES=args.nodes, ACCOUNTING="0", **PORTS,
                       JOB_SUBMIT_LUA=str(PLUGIN / "job_submit.lua"), TASK_PROLOG=str(PLUGIN / "task_prolog.sh"),
                       TASK_EPILOG=str(PLUGIN / "task_epilog.sh"),
                       PROLOG_SLURMCTLD=str(PLUGIN / "prolog_slurmctld.py"),
                       EPILOG_SLURMCTLD=str(PLUGIN / "epilog_slurmctld.py"),
                       HOOK_FILES=" ".join([str(PLUGIN / n) for n in ("hookclient.py", "slurmjob.py", "features_file.py", "task_prolog.py", "task_epilog.py")]
                                           + [str(staging / "hpcpredict-hooks.conf")]))
    subprocess.run([str(CLUSTER / "stop-cluster.sh")], env=cluster_env, capture_output=True)
    subprocess.run([str(CLUSTER / "start-cluster.sh")], env=cluster_env, check=True, capture_output=True)
    slurm_env = dict(os.environ, SLURM_CONF=str(SLURM_DIR / "etc" / "slurm.conf"))
    jobs = SLURM_DIR / "jobs"
    (jobs / "bench.sh").write_text(SCRIPT)
    etc_conf = SLURM_DIR / "etc" / "hpcpredict-hooks.conf"
    lua = SLURM_DIR / "etc" / "job_submit.lua"
    bump = [0]

    def configure(**changes):
        conf_values.update(changes)
        write_conf(etc_conf, conf_values)
        bump[0] += 1
        stamp = time.time() + bump[0]
        os.utime(lua, (stamp, stamp))        # slurmctld reloads the script (and its settings)

    def sbatch() -> tuple[float, str]:
        started = time.perf_counter()
        done = subprocess.run(["sbatch", "--hold", "-t", "30", "-o", "/dev/null", "bench.sh"], cwd=jobs,
                              env=slurm_env, capture_output=True, text=True)
        took = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(done.stderr)
        return took, done.stderr

    samples: dict[str, list[float]] = {"off": [], "on": [], "hung": []}
    fail_open = [0]
    try:
        for condition in ("off", "on"):          # warm-up: Lua load, daemon first call
            configure(enabled="true" if condition == "on" else "false")
            for _ in range(5):
                sbatch()
        blocks = max(1, args.samples // args.block)
        for index in range(2 * blocks):
            condition = ("off", "on")[index % 2]
            configure(enabled="true" if condition == "on" else "false", hook_socket=str(hook_socket))
            sbatch()                                # first call after a reload is not measured
            for _ in range(args.block):
                took, stderr = sbatch()
                if condition == "on" and "hpcpredict:" not in stderr:
                    fail_open[0] += 1             # the daemon missed the budget: counted, kept
                samples[condition].append(took)
            subprocess.run(["scancel", "--state=PENDING", "-u", "root"], env=slurm_env, capture_output=True)
        hung = Hung(str(work / "hung.sock"))
        configure(enabled="true", hook_socket=hung.path)
        sbatch()
        for _ in range(args.hung_samples):
            samples["hung"].append(sbatch()[0])
        hung.close()
    finally:
        subprocess.run(["scancel", "-u", "root"], env=slurm_env, capture_output=True)
        subprocess.run([str(CLUSTER / "stop-cluster.sh")], env=cluster_env, capture_output=True)
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)

    summary = {name: {"n": len(v), "median_ms": statistics.median(v) * 1e3, "p95_ms": percentile(v, 95) * 1e3,
                      "mean_ms": statistics.fmean(v) * 1e3} for name, v in samples.items() if v}
    summary["ratio_median_on_off"] = summary["on"]["median_ms"] / summary["off"]["median_ms"]
    summary["delta_median_ms"] = summary["on"]["median_ms"] - summary["off"]["median_ms"]
    summary["ratio_p95_on_off"] = summary["on"]["p95_ms"] / summary["off"]["p95_ms"]
    summary["on_fail_open"] = fail_open[0]
    result = {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "host": platform.node(),
              "cpus": os.cpu_count(), "slurm": subprocess.run(["sbatch", "--version"], capture_output=True,
                                                              text=True).stdout.strip(),
              "samples_per_condition": args.samples, "block": args.block, "script_bytes": len(SCRIPT),
              "summary": summary, "raw_ms": {k: [round(x * 1e3, 2) for x in v] for k, v in samples.items()}}
    Path(args.out).write_text(json.dumps(result, indent=1))
    print("| condition | n | median (ms) | p95 (ms) | mean (ms) |")
    print("|---|---:|---:|---:|---:|")
    for name, label in (("off", "hook disabled (Lua plugin only)"), ("on", "hook on, daemon answering"),
                        ("hung", "hook on, daemon hung (fail-open)")):
        s = summary[name]
        print(f"| {label} | {s['n']} | {s['median_ms']:.1f} | {s['p95_ms']:.1f} | {s['mean_ms']:.1f} |")
    print(f"\nmedian on/off = {summary['ratio_median_on_off']:.2f} (+{summary['delta_median_ms']:.1f} ms), "
          f"p95 on/off = {summary['ratio_p95_on_off']:.2f}; "
          f"{fail_open[0]} of {summary['on']['n']} hook calls missed the budget (job accepted unchanged)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
