"""How much could history alone give on these traces? Hindsight ceilings for the point and bound.

Replays each trace online with our model (exactly as ``run_traces.py``) and records, per job,
every expert's estimate and the selected one. Then, *in hindsight* (not achievable online —
these are ceilings, to tell whether a target is reachable with these experts):

- point: the oracle selector (best expert for each job), the per-user best fixed expert (one
  expert per user chosen after seeing all its jobs), and the best single expert overall;
- bound: the best constant log shift over the selected estimate per group (user; user and
  request; user, request and size), capped at the request, with a single price on kills chosen
  so that kills among jobs ending within their request stay <= the risk — i.e. the best any
  group-conditional conformal bound with a perfectly allocated kill budget could do.

Run by ``python -m benchmarks run walltime``.
"""
from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from hpcpredict.daemon.lab.history import read_trace, replay, scorable
from hpcpredict.daemon.history.model import EXPERTS, WalltimeModel

ROOT = Path(__file__).resolve().parents[2]
TRACES = ("KTH-SP2.swf", "hpc2n-subset.swf", "eagle-sample-1000.csv")


class _Recording(WalltimeModel):
    """Our model, remembering what it knew at each submission (experts, selected estimate)."""

    def __init__(self):
        super().__init__()
        self.seen: dict = {}

    def submit(self, job, risk=0.03, explain=True):
        out = super().submit(job, risk, explain=False)
        experts, _, selected, *_ = self.state.pending[job.job_id]
        self.seen[job.job_id] = (None if experts is None else experts.copy(), selected, math.log(out.runtime_s))
        return out


def point_ceilings(jobs, model) -> dict:
    runtime = np.log(np.maximum([j.runtime_s for j in jobs], 1.0))
    answered = np.array([model.seen[j.job_id][2] for j in jobs])
    ours = np.exp(-np.abs(answered - runtime))
    warm = np.array([model.seen[j.job_id][0] is not None for j in jobs])
    experts = np.array([model.seen[j.job_id][0] for j in jobs if model.seen[j.job_id][0] is not None])
    accuracy = np.exp(-np.abs(experts - runtime[warm, None]))
    oracle = ours.copy()
    oracle[warm] = accuracy.max(axis=1)
    users = np.array([j.user for j in jobs])[warm]
    fixed_warm = np.empty(warm.sum())
    for user in np.unique(users):
        mine = users == user
        fixed_warm[mine] = accuracy[mine][:, accuracy[mine].mean(axis=0).argmax()]
    fixed = ours.copy()
    fixed[warm] = fixed_warm
    means = accuracy.mean(axis=0)
    return {"ours": round(float(ours.mean()), 3), "ours_warm": round(float(ours[warm].mean()), 3),
            "warm_share": round(float(warm.mean()), 3),
            "oracle_per_job": round(float(oracle.mean()), 3),
            "per_user_best_fixed_expert": round(float(fixed.mean()), 3),
            "best_single_expert_on_warm": {EXPERTS[int(means.argmax())]: round(float(means.max()), 3)}}


def bound_ceiling(jobs, model, key, risk) -> tuple[float, float]:
    runtime = np.log(np.maximum([j.runtime_s for j in jobs], 1.0))
    request = np.array([math.log(j.requested_time_s) if j.requested_time_s > 0 else 50.0 for j in jobs])
    base = np.array([model.seen[j.job_id][1] for j in jobs])
    within = np.array([not j.censored for j in jobs])
    groups = defaultdict(list)
    for i, job in enumerate(jobs):
        groups[key(job)].append(i)
    options = []   # per group: (accuracy sum, kills) for every candidate shift
    for members in groups.values():
        idx = np.array(members)
        shifts = np.unique(np.append(runtime[idx] - base[idx], 50.0))
        bound = np.minimum(base[idx][None, :] + shifts[:, None], request[idx][None, :])
        options.append((np.exp(-np.abs(bound - runtime[idx][None, :])).sum(axis=1),
                        ((bound < runtime[idx][None, :]) & within[idx][None, :]).sum(axis=1)))
    budget, low, high = risk * within.sum(), 0.0, 1e5
    for _ in range(60):   # bisection on the price of a kill
        price = (low + high) / 2
        kills = sum(k[np.argmax(a - price * k)] for a, k in options)
        low, high = (price, high) if kills > budget else (low, price)
    picks = [np.argmax(a - high * k) for a, k in options]
    accuracy = sum(a[p] for (a, _), p in zip(options, picks)) / len(jobs)
    kills = sum(k[p] for (_, k), p in zip(options, picks)) / within.sum()
    return round(float(accuracy), 3), round(float(kills), 4)


def headroom(risk: float = 0.03) -> dict:
    """Per trace: our online answer next to the hindsight ceilings of the point and the bound."""
    results = {}
    for name in TRACES:
        jobs = scorable(read_trace(ROOT / "tests" / "data" / "traces" / name))
        model = _Recording()
        replay(jobs, {"hpcpredict": model}, risk)
        request_accuracy = float(np.mean([min(j.requested_time_s, max(j.runtime_s, 1.0)) /
                                          max(j.requested_time_s, max(j.runtime_s, 1.0)) for j in jobs]))
        bound = {label: bound_ceiling(jobs, model, key, risk) for label, key in (
            ("user", lambda j: j.user), ("user+request", lambda j: (j.user, j.requested_time_s)),
            ("user+request+size", lambda j: (j.user, j.requested_time_s, j.procs)))}
        results[name] = {"point": point_ceilings(jobs, model), "request_accuracy": round(request_accuracy, 3),
                         "bound_hindsight_shift": {k: {"accuracy": a, "x_request": round(a / request_accuracy, 2),
                                                       "kill_rate": r} for k, (a, r) in bound.items()}}
    return results
