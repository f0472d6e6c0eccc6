"""A hindsight bound: how much any risk-bounded limit could give, from a trace's information.

A lab reference, not a product policy (the ``scheduling_ceiling`` benchmark's ceiling). The bound of each job is the (1 - risk) quantile of the
work (trace runtime cut at the request) of its *group* over the whole trace: it knows the
group's runtime distribution, past and future, but not which of those runtimes is the job's.
It goes through the product's :func:`plan_limits` exactly as our online bound does, so it is
an upper reference for any predictor that bounds a job from what jobs like it ran:

- ``user-request-procs``: the user's jobs with the same request and size;
- ``user``: all the user's jobs;
- ``batch``: the run of jobs the model calibrates as one unit (same user, request and size,
  each submitted within 600 s of the previous one: :func:`batch_ids`).

``method``, how the group's runtimes become the bound:

- ``in-sample``: the quantile of all the group's runtimes, the job's own among them. Within a
  group at most a share ``risk`` of its jobs outlive it, but for a group smaller than 1 / risk
  it is the group's maximum, which may be the job's own runtime (a group of one is the oracle):
  an upper reference that leaks;
- ``leave-one-out``: the quantile of the *other* jobs of the group (a job alone in its group
  keeps its request): no leak, but in a small group the maximum of a few others is outlived
  far more often than ``risk``;
- ``conformal``: split conformal on the others: their ceil((1 - risk) (m + 1))-th smallest of
  m, none when that exceeds m (a group needs at least 1 / risk - 1 other jobs). What the
  group's information allows at the risk target, if the group's jobs are exchangeable.

Quantile: the smallest value v with (jobs at or below v) >= (1 - risk) x n (inverted CDF).

>>> import numpy as np
>>> group_quantiles(np.array([10., 20., 30., 40.]), np.array([0, 0, 0, 0]), 0.25)
array([30., 30., 30., 30.])
>>> group_quantiles(np.array([10., 20., 30., 40.]), np.array([0, 0, 0, 0]), 0.25, "leave-one-out")
array([40., 40., 40., 30.])
>>> group_quantiles(np.array([10., 20., 30., 40.]), np.array([0, 0, 0, 0]), 0.25, "conformal")
array([40., 40., 40., 30.])
>>> group_quantiles(np.array([10., 20., 30., 40.]), np.array([0, 0, 0, 0]), 0.2, "conformal")
array([inf, inf, inf, inf])
>>> group_quantiles(np.array([10., 20.]), np.array([0, 1]), 0.1, "leave-one-out")
array([inf, inf])
"""
from __future__ import annotations

import math

import numpy as np

from ...estimates import RuntimeEstimate
from .policies import hpcpredict_bound, replay_facts

_KILL = replay_facts("22.05")    # bound mode decides the same on every controller

GROUPINGS = ("user-request-procs", "user", "batch")
METHODS = ("in-sample", "leave-one-out", "conformal")
BATCH_WINDOW_S = 600.0     # the model's batch_window_s


def batch_ids(records, window_s: float) -> list[int]:
    """A batch id per record (records in submission order): a batch is a run of one user's jobs
    with the same request and size, each submitted within ``window_s`` of the run's previous one."""
    last: dict = {}
    ids, next_id = [], 0
    for record in records:
        key = (record.user, record.requested_time_s, record.procs)
        seen = last.get(key)
        if seen is not None and record.submit_time - seen[0] <= window_s:
            batch = seen[1]
        else:
            batch, next_id = next_id, next_id + 1
        last[key] = (record.submit_time, batch)
        ids.append(batch)
    return ids


def group_ids(workload, grouping: str) -> np.ndarray:
    """A group id per job of ``workload`` (jobs in submission order)."""
    if grouping == "batch":
        return np.array(batch_ids(workload.records, BATCH_WINDOW_S), dtype=np.int64)
    if grouping == "user-request-procs":
        keys = [(r.user, j.request_s, j.procs) for j, r in zip(workload.jobs, workload.records)]
    elif grouping == "user":
        keys = [r.user for r in workload.records]
    else:
        raise ValueError(f"grouping must be one of {', '.join(GROUPINGS)}, got {grouping!r}")
    index: dict = {}
    return np.array([index.setdefault(key, len(index)) for key in keys], dtype=np.int64)


def group_quantiles(values: np.ndarray, groups: np.ndarray, risk: float, method: str = "in-sample") -> np.ndarray:
    """Per job, the hindsight bound of its group at ``risk`` by ``method`` (inf: none)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    out = np.full(len(values), math.inf)
    order = np.lexsort((values, groups))
    starts = np.flatnonzero(np.r_[True, np.diff(groups[order]) != 0])
    for start, stop in zip(starts, np.r_[starts[1:], len(order)]):
        members = order[start:stop]
        ranked = values[members]            # ascending within the group
        n = len(members)
        if method == "in-sample":
            out[members] = ranked[max(math.ceil((1.0 - risk) * n - 1e-9), 1) - 1]
            continue
        # rank (1-based) among the n - 1 others: the empirical quantile, or split conformal's
        # ceil((1 - risk) (m + 1)) of m calibration values (none when it exceeds m)
        others = n - 1
        rank = math.ceil((1.0 - risk) * (others if method == "leave-one-out" else n) - 1e-9)
        if others < 1 or rank > others:
            continue
        k = max(rank, 1) - 1
        position = np.searchsorted(ranked, values[members], side="left")   # where each job sits
        out[members] = np.where(k < position, ranked[k], ranked[np.minimum(k + 1, n - 1)])
    return out


def hindsight_jobs(workload, grouping: str, risk: float, method: str = "in-sample") -> list:
    """The jobs of ``workload`` with the limits our bound policy (``policies.hpcpredict_bound``,
    i.e. :func:`plan_limits` in mode ``bound`` as the hook applies it) sets when the hindsight
    bound is its bound."""
    work = np.array([job.work_s for job in workload.jobs])
    bounds = group_quantiles(work, group_ids(workload, grouping), risk, method)
    jobs = []
    for job, bound in zip(workload.jobs, bounds):
        if not math.isfinite(bound):
            jobs.append(job)                 # nothing known of the group: the request stands
            continue
        bound = max(float(bound), 1.0)       # a job that ran 0 s: the shortest bound, not an insane one
        jobs.append(hpcpredict_bound(job, RuntimeEstimate(
            runtime_s=bound, low_s=bound, high_s=bound, coverage=0.0, bound_s=bound, explanation=(),
            model_name=f"hindsight-{grouping}", bound_calibrated=True), _KILL))   # the quantile in hindsight
    return jobs
