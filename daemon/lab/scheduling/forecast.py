"""``evaluate_forecast``: the start-time forecast (daemon/forecast) measured inside the replay.

The trace is replayed once (:func:`hpcpredict.daemon.scheduling.simulate`) under one policy
(``user``: the users' own limits, today's Slurm; ``hpcpredict``: the product's default policy
for the release). At the submission of every ``every``-th job, if it is still waiting after
that instant's pass, the replay's queue is the snapshot: its running jobs (since their start,
under the limit they run under) and its waiting ones in queue order, each with the belief of
the online prediction the scheduling replay uses (:func:`.policies.online_predictions`,
through :func:`hpcpredict.daemon.forecast.belief_from_interval`). The forecast of that job's
start (median, 80 % interval) and Slurm's method (every job at its limit) are compared with
its actual start in the same replay. Jobs submitted later are unknown to the forecast; its
arrivals model draws them from the trace's submissions of the last
:data:`~hpcpredict.daemon.forecast.simulate.ARRIVAL_WINDOW_S` before the snapshot (at or before
its instant, never after: what the daemon's keeper has seen appear), each with its policy's
limits and its belief (``arrivals=False``: none, the forecast as before the model). Each 80 %
interval is then calibrated (:func:`calibrated`, ``calibrate=False``: not) on the realized
errors of the forecasts made before it whose jobs had started by its instant, as the daemon's
keeper calibrates on the first forecasts of the jobs it has seen start.

Scores over the jobs forecast (all waited: a job that starts at its submission is not
forecast): the median absolute error of the median start and of Slurm's, the share of actual
starts inside the 80 % interval, and the same by wait class (``short``: actual wait below
:data:`LONG_WAIT_S`, ``long``: at or above).

>>> from hpcpredict.daemon.records import JobRecord
>>> trace = [JobRecord(str(i), "ann", 60.0 * i, runtime_s=300.0, requested_time_s=3600.0,
...                    requested_procs=2, end_time=60.0 * i + 300.0) for i in range(30)]
>>> scores = evaluate_forecast(trace, procs=4, runs=4)
>>> scores["n"] > 0, 0 <= scores["hpcpredict"]["coverage80"] <= 1, scores["slurm"]["coverage80"]
(True, True, None)
"""
from __future__ import annotations

import bisect
import statistics
from typing import Callable, Iterable

from ...errors import InvalidRequest
from ...forecast import QueuedJob, QueueSnapshot, belief_from_interval
from ...forecast.calibration import IntervalCalibration
from ...forecast.simulate import ARRIVAL_WINDOW_S, MAX_JOBS, MAX_RECENT, MAX_RUNS, USER_CORRELATION, forecast_start
from ...records import JobRecord
from ...scheduling import DEFAULT_RELEASE, SLURM_BF_RESOLUTION_S, planning_rule, simulate
from .policies import POLICIES, online_predictions, replay_facts, soft_risk_for
from .workload import sim_jobs

FORECAST_POLICIES = ("user", "hpcpredict")
LONG_WAIT_S = 3600.0       # the wait classes: short below an hour, long from an hour
SIMPLIFIES = ("one pool of interchangeable CPUs (no partitions, no node placement), no reservations, "
              "no preemption, priority order fixed at the snapshot (here FCFS, as the replay), "
              "later submissions drawn from the last day's before the snapshot (hour blocks, FCFS at the tail)")


def evaluate_forecast(records: Iterable[JobRecord], procs: int, *, policy: str = "user", risk: float = 0.03,
                      slurm: str = DEFAULT_RELEASE, soft_limit: bool | None = None, runs: int = 32,
                      every: int = 1, seed: int = 0, spread: float = 1.0, correlation: float | None = None,
                      arrivals: bool = True, calibrate: bool = True,
                      progress: Callable[[int, int], None] | None = None) -> dict:
    """The forecast's scores on one replay (see the module's docstring). ``spread``: every
    belief's ``log_sigma`` multiplied by it (1: as the stored interval says). ``arrivals``: the
    later submissions modelled (the default) or not. ``calibrate``: the 80 % interval calibrated
    on the realized errors of earlier forecasts (the default) or as the runs give it."""
    if policy not in FORECAST_POLICIES:
        raise InvalidRequest("--policy", f"must be one of {', '.join(FORECAST_POLICIES)}, got {policy!r}")
    if not 1 <= runs <= MAX_RUNS:
        raise InvalidRequest("--runs", f"must be from 1 to {MAX_RUNS}, got {runs}")
    if every < 1:
        raise InvalidRequest("--every", f"must be a positive whole number, got {every}")
    if not 0 < spread < 100:
        raise InvalidRequest("--spread", f"must be a positive factor below 100, got {spread}")
    try:
        planning_rule(slurm, soft_limit)
    except ValueError as error:
        raise InvalidRequest("--slurm", str(error)) from None
    records = list(records)
    workload = sim_jobs(records, procs)
    if not workload.jobs:
        raise InvalidRequest("trace", f"no job to replay on {procs} processors")
    facts = replay_facts(slurm, soft_limit, procs)
    answers = online_predictions(records, risk, progress=progress, soft_risk=soft_risk_for(facts))
    jobs = [POLICIES[policy](job, answers.get(id(record)), facts) for job, record in zip(workload.jobs, workload.records)]
    beliefs = {}
    for job, record in zip(jobs, workload.records):
        estimate = answers.get(id(record))
        belief = belief_from_interval(estimate.runtime_s, estimate.low_s, estimate.high_s, estimate.coverage) \
            if estimate is not None else None
        if belief is not None and spread != 1.0:
            belief = type(belief)(belief.median_s, belief.log_sigma * spread)
        beliefs[job.seq] = belief
    users = {job.seq: record.user for job, record in zip(jobs, workload.records)}
    by_submit = sorted(jobs, key=lambda j: (j.submit_s, j.seq))
    submits = [job.submit_s for job in by_submit]
    sampled = [job for job in by_submit if job.seq % every == 0]
    first_submit = submits[0]
    forecasts: dict[int, tuple] = {}
    cursor, too_large = 0, 0

    def snapshot(now, queue, running) -> QueueSnapshot:
        pictured = [QueuedJob(str(r.job.seq), users[r.job.seq], "", r.job.procs, r.limit_s, r.job.time_min_s or None,
                              r.job.submit_s, r.start_s, 0, beliefs[r.job.seq]) for r in running]
        pictured += [QueuedJob(str(j.seq), users[j.seq], "", j.procs, j.limit_s, j.time_min_s or None, j.submit_s,
                               None, rank, beliefs[j.seq]) for rank, j in enumerate(queue)]
        if not arrivals:
            return QueueSnapshot(now, procs, facts.rule, tuple(pictured))
        # the submissions of the window before now, at or before it (bisect_right): never a later one
        end = bisect.bisect_right(submits, now)
        begin = bisect.bisect_right(submits, now - ARRIVAL_WINDOW_S)
        watched_from = max(now - ARRIVAL_WINDOW_S, first_submit)
        if end - begin > MAX_RECENT:      # the daemon keeps as many: the latest, watched since the first kept
            begin = end - MAX_RECENT
            watched_from = submits[begin]
        recent = tuple(QueuedJob(str(j.seq), users[j.seq], "", j.procs, j.limit_s, j.time_min_s or None, j.submit_s,
                                 None, 0, beliefs[j.seq]) for j in by_submit[begin:end])
        return QueueSnapshot(now, procs, facts.rule, tuple(pictured), recent=recent, recent_from_s=watched_from)

    def observe(now, queue, running) -> None:
        nonlocal cursor, too_large
        arrived = []
        while cursor < len(sampled) and sampled[cursor].submit_s <= now:
            arrived.append(sampled[cursor].seq)
            cursor += 1
        waiting = {j.seq for j in queue} & set(arrived)
        if not waiting:
            return
        if len(queue) + len(running) > MAX_JOBS:     # the daemon's forecast refuses such a queue too
            too_large += len(waiting)
            return
        picture = snapshot(now, queue, running)
        for seq in sorted(waiting):
            forecast = forecast_start(picture, str(seq), runs=runs, seed=seed + seq, correlation=correlation)
            forecasts[seq] = (now, forecast)

    outcomes = simulate(jobs, procs, SLURM_BF_RESOLUTION_S, slurm, soft_limit, observe=observe)
    actual = {o.job.seq: o.start_s for o in outcomes}
    raw = sorted(((now, actual[seq], f) for seq, (now, f) in forecasts.items()), key=lambda row: (row[0], row[2].job_id))
    rows = calibrated(raw) if calibrate else raw
    scores: dict = {"policy": policy, "slurm_release": slurm, "planning_rule": facts.rule, "runs": runs,
                    "sampled_every": every, "spread": spread, "arrivals": arrivals, "calibrated": calibrate,
                    "correlation": USER_CORRELATION if correlation is None else correlation, "seed": seed,
                    "long_wait_s": LONG_WAIT_S, "n": len(rows), "n_jobs": len(jobs),
                    "not_forecast_queue_too_large": too_large, "procs": procs, "simplifies": SIMPLIFIES}
    classes = {"short": [r for r in rows if r[1] - r[0] < LONG_WAIT_S],
               "long": [r for r in rows if r[1] - r[0] >= LONG_WAIT_S]}
    for method in ("hpcpredict", "slurm"):
        scores[method] = _score(rows, method)
        scores[method]["by_wait"] = {name: _score(chosen, method) for name, chosen in classes.items()}
    scores["hpcpredict"]["coverage80_uncalibrated"] = _score(raw, "hpcpredict")["coverage80"]
    return scores


def calibrated(rows: list[tuple]) -> list[tuple]:
    """``rows`` (instant, actual start, forecast) in time order with each forecast's interval
    calibrated (:class:`~hpcpredict.daemon.forecast.calibration.IntervalCalibration`) on the
    forecasts made before it whose jobs had started by its instant: never a later start."""
    calibration = IntervalCalibration()
    by_start = sorted(rows, key=lambda row: row[1])
    done, out = 0, []
    for now, start, forecast in rows:
        while done < len(by_start) and by_start[done][1] <= now:
            made, started, earlier = by_start[done]
            calibration.add(earlier, taken_s=made, start_s=started)
            done += 1
        out.append((now, start, calibration.adjust(forecast, now)))
    return out


def _score(rows: list[tuple], method: str) -> dict:
    """Median absolute error (s) of the forecast start and the 80 % interval's coverage (None
    for Slurm's method, a point)."""
    if not rows:
        return {"n": 0, "median_abs_error_s": None, "coverage80": None}
    if method == "slurm":
        errors = [abs(f.slurm_start_s - start) for _, start, f in rows]
        coverage = None
    else:
        errors = [abs(f.median_start_s - start) for _, start, f in rows]
        coverage = sum(f.low80_start_s <= start <= f.high80_start_s for _, start, f in rows) / len(rows)
    return {"n": len(rows), "median_abs_error_s": float(statistics.median(errors)), "coverage80": coverage}
