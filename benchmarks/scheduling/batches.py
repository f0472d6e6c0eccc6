"""How batchy the bound's calibration residuals are on a trace (measured, not a method).

A *batch* is a run of jobs of one user with the same request and size, each submitted within
``window_s`` of the previous one of the run. For every job the online model scores (as in
``online_predictions``: predicted at submission, observed when it ended) this records the
selected estimate's log residual and gap, then reports how many calibration units the jobs
really are: the number of batches, Kish's effective sample size n / (1 + (m - 1) ICC) from the
intra-batch correlation of the residuals, and, among the jobs the bound shortened, how the
jobs that outlived it group into batches.
"""
from __future__ import annotations

import heapq
import math
from collections import Counter

import numpy as np

from hpcpredict.daemon.lab.scheduling import batch_ids


def icc(values: np.ndarray, groups: np.ndarray) -> float:
    """One-way ANOVA intra-class correlation of ``values`` within ``groups``."""
    labels, inverse, sizes = np.unique(groups, return_inverse=True, return_counts=True)
    k, n = len(labels), len(values)
    if k < 2 or n <= k:
        return float("nan")
    means = np.bincount(inverse, values) / sizes
    grand = values.mean()
    msb = float((sizes * (means - grand) ** 2).sum() / (k - 1))
    msw = float(((values - means[inverse]) ** 2).sum() / (n - k))
    m0 = (n - (sizes ** 2).sum() / n) / (k - 1)
    return (msb - msw) / (msb + (m0 - 1) * msw)


def measure(records, risk: float = 0.03, windows=(60.0, 300.0, 600.0, 900.0), model=None) -> dict:
    from hpcpredict.daemon.lab.history import end_time, scorable
    from hpcpredict.daemon.history.model import WARM, WalltimeModel

    model = model or WalltimeModel()
    ordered = scorable(records)
    rows = []     # (index, residual, gap, shortened, outlived) for WARM, uncensored jobs
    running: list = []

    def observe(index):
        record = ordered[index]
        pending = model.state.pending.get(record.job_id)
        if pending is not None and pending[3] == WARM and not record.censored:
            estimate, bound = pending[2], pending[4]
            runtime = math.log(max(record.runtime_s, 1.0))
            log_request = math.log(record.requested_time_s) if record.requested_time_s > 0 else math.inf
            shortened = bound < log_request
            rows.append((index, runtime - estimate, min(log_request - estimate, 50.0), shortened,
                         shortened and runtime > bound))
        model.observe(record)

    for index, record in enumerate(ordered):
        while running and running[0][0] <= record.submit_time:
            observe(heapq.heappop(running)[1])
        model.submit(record, risk, explain=False)
        heapq.heappush(running, (end_time(record), index))
    while running:
        observe(heapq.heappop(running)[1])
    index = np.array([r[0] for r in rows])
    residuals = np.array([r[1] for r in rows])
    shortened = np.array([r[3] for r in rows])
    outlived = np.array([r[4] for r in rows])
    out = {"scored_jobs": len(rows), "shortened": int(shortened.sum()), "outlived": int(outlived.sum()),
           "by_window": {}}
    for window in windows:
        ids = np.array(batch_ids(ordered, window))[index]
        sizes = Counter(ids.tolist())
        rho = icc(residuals, ids)
        mean_size = len(ids) / len(sizes)
        kish = len(ids) / (1 + (float(np.mean([sizes[i] for i in ids])) - 1) * max(rho, 0.0))
        killed_batches = Counter(ids[outlived].tolist())
        short_batches = set(ids[shortened].tolist())
        out["by_window"][str(int(window))] = {
            "batches": len(sizes), "jobs_per_batch": round(mean_size, 2),
            "jobs_in_batches_of_2_plus": int(sum(n for n in sizes.values() if n > 1)),
            "largest_batch": max(sizes.values()),
            "residual_icc": round(rho, 3), "kish_effective_n": round(kish, 1),
            "shortened_batches": len(short_batches),
            "outliving_batches": len(killed_batches),
            "outliving_jobs_by_batch": sorted(killed_batches.values(), reverse=True)[:10],
        }
    return out
