"""The start-time forecast (issue #41): its accuracy in the replay, and its cost.

    python -m benchmarks run forecast [--traces kth,hpc2n] [--releases 24.11,26.05]
                                      [--policies user,hpcpredict] [--every 1] [--runs 32]

1. *Accuracy*: ``hpcpredict evaluate forecast`` (daemon/lab/scheduling/forecast.py) per trace,
   policy and release: at each (``--every``-th) submission the forecast of that job's start from
   the replay's queue against its actual start in the same replay, and Slurm's method (every job
   at its limit) beside it; median absolute error, 80 % interval coverage, by wait class (under /
   from 1 h). Goal: our error at most half of Slurm's, coverage 75-85 %.
2. *Cost*: ``forecast_starts`` over a synthetic 500-job queue (150 running, 350 pending, 1000
   CPUs) and a 2,000-job one, 32 runs, timed (seconds of one core; the refresh a daemon would
   run), without and with the arrivals model (720 recent submissions, one every 2 minutes).
"""
from __future__ import annotations

import argparse
import random
import time

from benchmarks.areas.scheduling import TRACE_FILES, TRACES
from hpcpredict.daemon.forecast import QueuedJob, QueueSnapshot, RuntimeBelief
from hpcpredict.daemon.forecast.simulate import forecast_starts
from hpcpredict.daemon.lab.history import read_trace
from hpcpredict.daemon.lab.scheduling import trace_machine_size
from hpcpredict.daemon.lab.scheduling import evaluate_forecast

DESCRIPTION = "start-time forecast vs Slurm's all-at-limit method in the replay (KTH-SP2, HPC2N), and its cost"


def synthetic_queue(jobs: int = 500, seed: int = 1, arrivals: bool = True) -> QueueSnapshot:
    rng = random.Random(seed)
    now, procs, held, queued = 1_000_000.0, 2 * jobs, 0, []
    for i in range(jobs):
        cpus = rng.choice([1, 2, 4, 8, 16, 32, 64])
        limit = rng.choice([600, 3600, 4 * 3600, 24 * 3600])
        belief = RuntimeBelief(limit * rng.uniform(0.05, 0.8), 0.8)
        user = f"u{rng.randrange(40)}"
        if i < 0.3 * jobs and held + cpus <= procs:
            held += cpus
            queued.append(QueuedJob(f"r{i}", user, "p", cpus, limit, None, now - 5000, now - rng.uniform(0, limit), 0,
                                    belief))
        else:
            queued.append(QueuedJob(f"p{i}", user, "p", cpus, limit, None, now - 100, None, i, belief))
    # the arrivals model's source: a submission every 2 minutes over the last day, shaped as the queue's
    recent = tuple(QueuedJob(f"s{k}", f"u{rng.randrange(40)}", "p", rng.choice([1, 2, 4, 8, 16, 32, 64]),
                             (limit := rng.choice([600, 3600, 4 * 3600, 24 * 3600])), None, now - 120.0 * k, None, 0,
                             RuntimeBelief(limit * rng.uniform(0.05, 0.8), 0.8)) for k in range(720))
    return QueueSnapshot(now, procs, "hard_end", tuple(queued), recent=recent if arrivals else (),
                         recent_from_s=now - 86400.0 if arrivals else None)


def _cost(runs: int) -> dict:
    out = {}
    for jobs in (500, 2000):
        for arrivals in (False, True):
            snapshot = synthetic_queue(jobs, arrivals=arrivals)
            started = time.perf_counter()
            forecast_starts(snapshot, runs=runs)
            out[f"{jobs}_jobs{'_arrivals' if arrivals else ''}_s"] = round(time.perf_counter() - started, 3)
    return out


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run forecast")
    parser.add_argument("--traces", default="kth,hpc2n")
    parser.add_argument("--releases", default="24.11,26.05")
    parser.add_argument("--policies", default="user,hpcpredict")
    parser.add_argument("--every", type=int, default=1)
    parser.add_argument("--runs", type=int, default=32)
    options = parser.parse_args(args)
    results: dict = {"method": "daemon/forecast/simulate.py on daemon/scheduling/easy.py (bf_resolution 60 s), "
                               "beliefs from the online predictions through belief_from_interval",
                     "cost_32_runs": _cost(32), "traces": {}}
    for trace in options.traces.split(","):
        path = TRACES / TRACE_FILES[trace]
        records, procs = read_trace(str(path), "swf"), trace_machine_size(path)
        for release in options.releases.split(","):
            for policy in options.policies.split(","):
                scores = evaluate_forecast(records, procs, policy=policy, slurm=release, runs=options.runs,
                                           every=options.every)
                results["traces"][f"{trace} {policy} {release}"] = {
                    key: scores[key] for key in ("n", "sampled_every", "runs", "hpcpredict", "slurm")}
    return results
