"""Issue 39, finding 2 on a real Slurm 22.05 controller (bound mode: --time-min is a kill limit).

alice (the victim) ran the real LAMMPS melt sweep (tests/data/runtime/lammps_melt.csv at 600x
the steps, runtimes scaled with them: 1-17 min); bob (the attacker) reports 2-second runs of a
third of her configurations under the same application name; carol has no runs of it. Every
run reaches the daemon through ReportOutcome as the epilog sends it; the model is trained with
`hpcpredict train-runtime --from-store` (which reloads the daemon); then alice and carol submit
the same job through sbatch and job_submit.lua. alice's own runs set her --time-min; carol's
job gets none (no two users' runs agree, so there is no pooled model; before the fix the pooled
model of alice's and bob's runs gave her --time-min=00:05:00 and her 8-minute job was killed).
"""
from __future__ import annotations

import csv
import subprocess
from pathlib import Path

import numpy as np

from hpcpredict.slurm_plugin import slurmjob

from .harness import poll

DATA = Path(__file__).resolve().parents[1] / "data" / "runtime" / "lammps_melt.csv"
INPUTS = ("x", "y", "z", "steps", "cutoff", "skin", "temp", "newton")
SCALE = 600


def runs() -> list[tuple[dict, float]]:
    with DATA.open() as handle:
        return [({name: (row[name] == "on" if name == "newton" else float(row[name]) * (SCALE if name == "steps" else 1))
                  for name in INPUTS}, float(row["runtime_s"]) * SCALE) for row in csv.DictReader(handle)]


def report(daemon, user: str, items, prefix: str, start: int) -> None:
    for index, (inputs, runtime) in enumerate(items):
        values = {name: ({"flag": value} if isinstance(value, bool) else {"number": value})
                  for name, value in inputs.items()}
        request = {"job": {"user": user, "application": "melt", "account": "research", "partition": "debug"},
                   "resources": {"nodes": 1}, "time_limit_s": 3600, "inputs": values}
        begin = start + index * 60
        ack = daemon.call("ReportOutcome", {"job_id": f"{prefix}-{index}", "state": "COMPLETED",
                                            "submit_time": begin - 10, "start_time": begin,
                                            "end_time": begin + int(runtime) + 1, "elapsed_s": runtime,
                                            "request": request})
        assert ack["stored"] is True


def script(inputs: dict) -> str:
    directives = " ".join(f"{name}={('on' if value else 'off') if isinstance(value, bool) else f'{value:g}'}"
                          for name, value in inputs.items())
    return f"#!/bin/bash\n#HPCPREDICT app=melt {directives}\nsleep 1\n"


def test_another_users_short_runs_never_set_a_third_users_time_min(cluster, daemon):
    victim = runs()
    probe = max(victim, key=lambda run: run[1])[0]          # alice's longest configuration (16.5 min)
    rng = np.random.default_rng(0)
    attack = [(victim[i][0], 2.0) for i in rng.choice(len(victim), size=len(victim) // 3, replace=False)]
    report(daemon, "alice", victim, "melt-alice", 1_690_000_000)
    report(daemon, "bob", attack, "melt-bob", 1_690_100_000)
    trained = daemon.cli("train-runtime", "--from-store", "--application", "melt", "--learner", "log-linear")
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert "bob kept out of the pooled model" in trained.stdout, trained.stdout
    cluster.write_script("melt.sh", script(probe))
    jobs = {}
    try:
        for user in ("alice", "carol"):
            jobs[user], _, stderr, _ = cluster.sbatch(user, "-H", "-t", "60", "-o", "/dev/null", "melt.sh")
            assert "hpcpredict" in stderr, stderr
        alice = poll(lambda: cluster.job(jobs["alice"]) or None, 10, "alice's job")
        carol = poll(lambda: cluster.job(jobs["carol"]) or None, 10, "carol's job")
        # alice: her own runs' bound (truth 16.5 min) as her --time-min, below her --time=60
        assert alice.get("TimeMin", "N/A") not in ("N/A", ""), alice
        assert 16 * 60 <= slurmjob.slurm_duration_s(alice["TimeMin"]) < 3600, alice["TimeMin"]
        # carol: nothing from alice's or bob's runs
        assert carol.get("TimeMin", "N/A") in ("N/A", ""), carol
        assert carol["TimeLimit"] == "01:00:00", carol
    finally:
        for job_id in jobs.values():
            subprocess.run(["scancel", job_id], env=cluster.env(), timeout=30)
