"""Scheduling impact of the walltime policies on real traces (EASY backfilling replay).

    python -m benchmarks run scheduling [--risks 0.01,0.03,0.1,0.2,0.3] [--traces kth,hpc2n]

For KTH-SP2 (28,481 jobs, 100 processors) and the HPC2N subset (3,170 jobs, 240 processors)
in tests/data/traces: every policy of daemon/scheduling/policies.py at each risk target
(predictions made online once per risk, shared by the policies), with per policy the issue's
metrics, the share of the oracle's improvement in mean bounded slowdown it captures,
``killed`` against the risk target x the jobs whose limit it shortened (and their ratio,
``kill_rate_shortened``), and whether the
goal holds (at least half of the oracle's improvement, no more kills than the risk allows).
``hpcpredict/jobs-as-units`` is the policy with the bound calibrated as before batches were
units (``batch_window_s`` = 0: every job its own calibration unit), for comparison; ``batches``
measures how batchy the calibration residuals are, at the first risk and under that per-job
calibration (benchmarks/scheduling/batches.py).
Deterministic: no timing is measured, so the machine's load does not change the numbers.
"""
from __future__ import annotations

import argparse
from pathlib import Path

DESCRIPTION = "EASY backfilling replay of KTH-SP2 and HPC2N under each walltime policy (bsld, wait, kills)"

TRACES = Path(__file__).resolve().parents[2] / "tests" / "data" / "traces"
TRACE_FILES = {"kth": "KTH-SP2.swf", "hpc2n": "hpc2n-subset.swf"}
BASELINES = ("user", "oracle")
# Policies with a time_min depend on what Slurm gives a job backfilled on it (easy.py):
# 22.05 (our test cluster) the time_min itself; later Slurm the room before the reservation;
# 22.05 at worst (its backfill thread starts every job) the time_min for every job.
MODES = {"": "time_min", "/reservation": "reservation", "/any-start": "any-start"}
PREDICTED_BY_MODE = ("hpcpredict",)
PREDICTED = ("hpcpredict-time", "hpcpredict-soft", "hpcpredict-soft-point")
UNBATCHED = "hpcpredict/jobs-as-units"   # the bound calibrated with every job its own unit


def _captured(scores: dict, name: str) -> float | None:
    room = scores["user"]["mean_bounded_slowdown"] - scores["oracle"]["mean_bounded_slowdown"]
    gain = scores["user"]["mean_bounded_slowdown"] - scores[name]["mean_bounded_slowdown"]
    return round(gain / room, 3) if room > 0 else None


def _rounded(scores: dict) -> dict:
    return {key: round(value, 4) if isinstance(value, float) else value for key, value in scores.items()}


def replay_trace(path: Path, risks: list[float]) -> dict:
    from benchmarks.scheduling.batches import measure
    from hpcpredict.daemon.history.model import HpcPredictModel, ModelParams
    from hpcpredict.daemon.history.traces import read_trace
    from hpcpredict.daemon.scheduling.policies import online_predictions
    from hpcpredict.daemon.scheduling.replay import replay_policies
    from hpcpredict.daemon.scheduling.workload import sim_jobs, trace_machine_size

    records = read_trace(path)
    procs = trace_machine_size(path)
    workload = sim_jobs(records, procs)
    baselines = replay_policies(workload, {}, BASELINES)
    for suffix, mode in MODES.items():
        baselines["oracle-time-min" + suffix] = replay_policies(workload, {}, ["oracle-time-min"],
                                                                time_min_limit=mode)["oracle-time-min"]
    out = {"trace": path.name, "procs": procs, "jobs": len(workload.jobs), "dropped": dict(workload.dropped),
           "baselines": {name: _rounded(s) for name, s in baselines.items()},
           "oracle_room_bsld": round(baselines["user"]["mean_bounded_slowdown"]
                                     - baselines["oracle"]["mean_bounded_slowdown"], 3),
           "oracle_time_min_captured": {name: _captured(baselines, name) for name in baselines
                                        if name.startswith("oracle-time-min")},
           # under the per-job calibration: how the jobs outliving its bound group into batches
           "batches": measure(records, risks[0], model=HpcPredictModel(ModelParams(batch_window_s=0.0)))
           if risks else None,
           "by_risk": {}}
    for risk in risks:
        answers = online_predictions(records, risk)
        scores = dict(baselines, **replay_policies(workload, answers, PREDICTED))
        for suffix, mode in MODES.items():
            for name, result in replay_policies(workload, answers, PREDICTED_BY_MODE, time_min_limit=mode).items():
                scores[name + suffix] = result
        unbatched = online_predictions(records, risk, model=HpcPredictModel(ModelParams(batch_window_s=0.0)))
        scores[UNBATCHED] = replay_policies(workload, unbatched, ["hpcpredict"])["hpcpredict"]
        per_policy = {}
        for name in [n + suffix for n in PREDICTED_BY_MODE for suffix in MODES] + list(PREDICTED) + [UNBATCHED]:
            s = scores[name]
            captured = _captured(scores, name)
            allowed = risk * s["shortened"]
            per_policy[name] = dict(_rounded(s), captured=captured,
                                    kills_allowed=round(allowed, 1), kills_within_risk=s["killed"] <= allowed,
                                    # the bound is calibrated on the jobs it shortens; this is the
                                    # share of the jobs it actually shortened that a limit killed
                                    kill_rate_shortened=round(s["killed"] / s["shortened"], 4) if s["shortened"] else None,
                                    wait_vs_user=round(s["mean_wait_s"] / scores["user"]["mean_wait_s"], 4),
                                    goal_met=(captured is not None and captured >= 0.5 and s["killed"] <= allowed))
        out["by_risk"][str(risk)] = per_policy
    return out


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks run scheduling")
    parser.add_argument("--risks", default="0.01,0.03,0.1,0.2,0.3", help="risk targets, comma-separated")
    parser.add_argument("--traces", default="kth,hpc2n", help=f"from {', '.join(TRACE_FILES)}")
    options = parser.parse_args(args)
    risks = [float(r) for r in options.risks.split(",")]
    return {"method": "EASY backfilling with Slurm's time_min semantics (daemon/scheduling/easy.py), "
                      "bf_resolution 60 s; policy names without a suffix: Slurm 22.05 (a job backfilled "
                      "on its time_min runs under it), '/reservation': later Slurm (limit lowered only to "
                      "the room before the reservation), '/any-start': 22.05 when its backfill thread "
                      "starts every job (every time_min job runs under it); online predictions as in evaluate walltime; "
                      "killed = jobs a policy-set limit stopped before their work (work = trace runtime "
                      "cut at the request)",
            "traces": {key: replay_trace(TRACES / TRACE_FILES[key], risks) for key in options.traces.split(",")}}
