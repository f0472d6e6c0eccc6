"""What the walltime policy's gain is worth once kills cost, and how much any bound can give.

    python -m benchmarks run scheduling_ceiling [--risks 0.01,0.03,0.1,0.2,0.25,0.3,0.35,0.4,0.5] [--traces kth,hpc2n]

Same replay as the ``scheduling`` area (EASY backfilling, Slurm 22.05's ``time_min``
semantics, bf_resolution 60 s) on KTH-SP2 and the HPC2N subset, two questions:

1. *Kills that cost.* By default a killed job counts as served at its kill (its lost work and
   its user's resubmission are free, so kills shorten the queue). With resubmission
   (``simulate(..., resubmit_killed=True)``) a job killed below its request is submitted again
   at its kill with the user's own request and no ``time_min``, and scored from its first
   submission to its final end. ``ours``: our bound policy (``hpcpredict-bound``, online predictions as in
   ``evaluate walltime``) at each risk under both accountings, the share of the oracle's gain
   in mean bounded slowdown, the kills against risk x shortened, the lowest risk where the
   goal (>= half the gain, kills within the risk) holds, and how much of the change in mean
   bounded slowdown comes from the killed jobs themselves and how much from the others.
2. *Information ceiling.* ``hindsight``: the bound of each job is the (1 - risk) quantile of
   its group's runtimes over the whole trace (daemon/lab/scheduling/hindsight.py; groups
   user+request+size, user, batch; in-sample, leave-one-out or split conformal), through the
   same policy and simulator, under both accountings.

The oracle and the users' requests kill nothing, so their scores are the same under both
accountings and the shares of both use one denominator. Deterministic: no timing is measured.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.areas.scheduling import TRACE_FILES, TRACES
from hpcpredict.daemon.lab.history import read_trace
from hpcpredict.daemon.lab.scheduling import (GROUPINGS, METHODS, group_ids, hindsight_jobs, hpcpredict_bound,
                                              killed_split, online_predictions, replay_facts, replay_jobs,
                                              replay_policies, sim_jobs, simulate, trace_machine_size)

DESCRIPTION = ("walltime policy vs oracle when killed jobs are resubmitted, and a hindsight "
               "group-quantile bound as the ceiling of any bound (KTH-SP2, HPC2N)")

SLURM = "22.05"     # where --time-min kills: the bound's own path (mode "bound")
ACCOUNTINGS = {"served": False, "resubmitted": True}   # a killed job: done at its kill / resubmitted
KEPT = ("mean_bounded_slowdown", "mean_wait_s", "utilization", "killed", "killed_node_hours",
        "shortened", "lowered", "resubmitted")


def _scores(s: dict, user: dict, room: float, risk: float) -> dict:
    captured = round((user["mean_bounded_slowdown"] - s["mean_bounded_slowdown"]) / room, 3) if room > 0 else None
    allowed = risk * s["shortened"]
    out = {key: round(s[key], 4) if isinstance(s[key], float) else s[key] for key in KEPT if key in s}
    out.update(captured=captured, bsld_gain=round(user["mean_bounded_slowdown"] - s["mean_bounded_slowdown"], 3),
               kills_allowed=round(allowed, 1), kills_within_risk=s["killed"] <= allowed,
               goal_met=captured is not None and captured >= 0.5 and s["killed"] <= allowed)
    return out


def _group_sizes(ids) -> dict:
    """How many jobs sit in groups too small for a quantile at risk 0.03 (fewer than 34 jobs:
    there the in-sample bound is the group's maximum, and conformal gives none)."""
    sizes = np.bincount(ids)[ids]       # per job, the size of its group
    return {"groups": int(len(np.unique(ids))), "jobs_alone": int((sizes == 1).sum()),
            "jobs_in_groups_below_10": int((sizes < 10).sum()), "jobs_in_groups_below_34": int((sizes < 34).sum())}


def replay_trace(path: Path, risks: list[float]) -> dict:
    records = read_trace(path)
    procs = trace_machine_size(path)
    workload = sim_jobs(records, procs)
    base = replay_policies(workload, {}, ["user", "oracle", "oracle-time-min"], slurm=SLURM)
    again = replay_policies(workload, {}, ["user", "oracle", "oracle-time-min"], slurm=SLURM, resubmit_killed=True)
    for name in base:      # no kill: resubmission changes nothing (checked, not assumed)
        assert again[name]["killed"] == 0 and again[name]["mean_bounded_slowdown"] == base[name]["mean_bounded_slowdown"]
    user = base["user"]
    room = user["mean_bounded_slowdown"] - base["oracle"]["mean_bounded_slowdown"]
    out = {"trace": path.name, "procs": procs, "jobs": len(workload.jobs),
           "user": _scores(user, user, room, 0.0), "oracle": _scores(base["oracle"], user, room, 0.0),
           "oracle_room_bsld": round(room, 3),
           "oracle_time_min": _scores(base["oracle-time-min"], user, room, 0.0),
           "group_sizes": {grouping: _group_sizes(group_ids(workload, grouping)) for grouping in GROUPINGS},
           "ours": {}, "hindsight": {}}
    user_outcomes = simulate(workload.jobs, procs, slurm=SLURM)
    for risk in risks:
        answers = online_predictions(records, risk)
        jobs = [hpcpredict_bound(job, answers.get(id(record)), replay_facts(SLURM, False, procs))
                for job, record in zip(workload.jobs, workload.records)]
        out["ours"][str(risk)] = {
            accounting: dict(_scores(replay_jobs(workload, jobs, slurm=SLURM, resubmit_killed=resubmit), user, room, risk),
                             **killed_split(user_outcomes, simulate(jobs, procs, slurm=SLURM, resubmit_killed=resubmit)))
            for accounting, resubmit in ACCOUNTINGS.items()}
        for grouping in GROUPINGS:
            for method in METHODS:
                jobs = hindsight_jobs(workload, grouping, risk, method)
                out["hindsight"].setdefault(f"{grouping}/{method}", {})[str(risk)] = {
                    accounting: _scores(replay_jobs(workload, jobs, slurm=SLURM, resubmit_killed=resubmit), user, room, risk)
                    for accounting, resubmit in ACCOUNTINGS.items()}
    out["lowest_risk_goal_met"] = {
        accounting: next((risk for risk in risks if out["ours"][str(risk)][accounting]["goal_met"]), None)
        for accounting in ACCOUNTINGS}
    return out


def _headline(traces: dict) -> dict:
    head = {}
    for key, trace in traces.items():
        head[key] = {"oracle_room_bsld": trace["oracle_room_bsld"],
                     "lowest_risk_goal_met": trace["lowest_risk_goal_met"],
                     "ours_captured": {risk: {a: s["captured"] for a, s in by.items()}
                                       for risk, by in trace["ours"].items()},
                     "hindsight_user-request-procs_captured": {
                         method: {risk: {a: s["captured"] for a, s in by.items()}
                                  for risk, by in trace["hindsight"][f"user-request-procs/{method}"].items()}
                         for method in ("in-sample", "conformal")}}
    return head


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks run scheduling_ceiling")
    parser.add_argument("--risks", default="0.01,0.03,0.1,0.2,0.25,0.3,0.35,0.4,0.5", help="risk targets, comma-separated")
    parser.add_argument("--traces", default="kth,hpc2n", help=f"from {', '.join(TRACE_FILES)}")
    options = parser.parse_args(args)
    risks = [float(r) for r in options.risks.split(",")]
    traces = {key: replay_trace(TRACES / TRACE_FILES[key], risks) for key in options.traces.split(",")}
    return {"method": "EASY backfilling with Slurm 22.05's time_min semantics (daemon/scheduling/easy.py), "
                      "bf_resolution 60 s; accountings: 'served' = a killed job is done at its kill (the "
                      "scheduling area's scores), 'resubmitted' = it is submitted again at its kill with its "
                      "user's request and no time_min, scored from first submission to final end; captured = "
                      "(user bsld - policy bsld) / (user bsld - oracle bsld); goal = captured >= 0.5 and "
                      "killed <= risk x shortened; hindsight = (1 - risk) group quantile of the whole trace's "
                      "runtimes (daemon/lab/scheduling/hindsight.py) through the same policy",
            "headline": _headline(traces), "traces": traces}
