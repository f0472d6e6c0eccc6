"""Scores of one scheduling replay.

``mean_bounded_slowdown`` uses tau = 10 s (Feitelson et al.): max(1, (wait + run) / max(run, tau))
with ``run`` the time the job really ran in the replay. ``utilization`` is processor-seconds
used / (processors x (last end - first submission)). ``killed`` counts jobs a limit stopped
before their work was done (the users' own requests never do: a job's work is cut at its
request, as the trace's own kill did); ``killed_node_hours`` is what those jobs had run when
killed, in trace processors x hours (SWF counts processors; on a node-exclusive site they are
nodes). ``killed_censored`` counts the killed jobs that the trace shows ran into their own
request anyway (killed there in reality; the policy only stopped them earlier).

The tail, where a soft limit's cost shows (each soft job can move a waiting job's reservation
to its hard end): ``p99_wait_s`` and ``max_wait_s`` over all jobs, and ``wide_mean_wait_s``,
``wide_p99_wait_s``, ``wide_max_wait_s`` over the *wide* jobs, those whose processor count is
at or above the 95th percentile of the replayed jobs' (``wide_procs``; ``wide_n`` of them):
the jobs that wait for a reservation. Percentiles interpolate linearly (numpy's default).

A replay with resubmission (``simulate(..., resubmit_killed=True)``) has one more outcome per
killed job, its retry. Scores are then the user's: a job's wait runs from its first
submission to its final end minus its final run (so it holds its first wait, the lost run and
the retry's wait), ``run`` is the final run, ``utilization`` counts the lost runs too (the
machine was busy), ``n`` and the other counts are over first submissions, and
``resubmitted`` counts the retries. Without retries the scores are those above.

>>> from hpcpredict.daemon.scheduling.easy import simulate
>>> from hpcpredict.daemon.scheduling.jobs import SimJob
>>> summary = summarize(simulate([SimJob(0, "a", 0, 1, 100, 100, 100)], procs=2), procs=2)
>>> summary["n"], summary["mean_wait_s"], summary["utilization"]
(1, 0.0, 0.5)
"""
from __future__ import annotations

import numpy as np

TAU_S = 10.0


def summarize(outcomes, procs: int) -> dict:
    """The metrics of a replay (plain floats and ints, JSON-ready)."""
    first, wait, slowdown = job_scores(outcomes)
    n = len(first)
    if n == 0:
        nan = float("nan")
        return {"n": 0, "mean_wait_s": nan, "mean_bounded_slowdown": nan, "utilization": nan, "killed": 0,
                "killed_node_hours": 0.0, "killed_censored": 0, "backfilled": 0, "lowered": 0,
                "p99_wait_s": nan, "max_wait_s": nan, "wide_procs": 0, "wide_n": 0, "wide_mean_wait_s": nan,
                "wide_p99_wait_s": nan, "wide_max_wait_s": nan}
    used = sum(o.job.procs * (o.end_s - o.start_s) for o in outcomes)      # lost runs and retries too
    lost = sum(o.job.procs * (o.end_s - o.start_s) for o in first if o.killed)
    span = max(o.end_s for o in outcomes) - min(o.job.submit_s for o in first)
    sizes = np.fromiter((o.job.procs for o in first), float, n)
    wide_procs = float(np.percentile(sizes, 95))
    wide = wait[sizes >= wide_procs]        # never empty: the largest job is at or above it
    return {
        "n": n,
        "mean_wait_s": float(wait.mean()),
        "mean_bounded_slowdown": float(slowdown.mean()),
        "utilization": float(used / (procs * span)) if span > 0 else float("nan"),
        "killed": int(sum(o.killed for o in first)),
        "killed_node_hours": float(lost / 3600.0),
        "killed_censored": int(sum(o.killed and 0 < o.job.request_s <= o.job.work_s for o in first)),
        "backfilled": int(sum(o.backfilled for o in first)),
        "lowered": int(sum(o.lowered for o in first)),
        "p99_wait_s": float(np.percentile(wait, 99)),
        "max_wait_s": float(wait.max()),
        "wide_procs": wide_procs,
        "wide_n": int(len(wide)),
        "wide_mean_wait_s": float(wide.mean()),
        "wide_p99_wait_s": float(np.percentile(wide, 99)),
        "wide_max_wait_s": float(wide.max()),
    }


def job_scores(outcomes) -> tuple[list, np.ndarray, np.ndarray]:
    """Per job as its user saw it: (its first outcome, wait s, bounded slowdown), in the order
    of ``outcomes``; a resubmitted job's wait runs to its retry's start (see above)."""
    retries = {o.job.retry_of: o for o in outcomes if o.job.retry_of >= 0}
    first = [o for o in outcomes if o.job.retry_of < 0] if retries else list(outcomes)
    final = [retries.get(o.job.seq, o) for o in first] if retries else first
    n = len(first)
    submit = np.fromiter((o.job.submit_s for o in first), float, n)
    start = np.fromiter((o.start_s for o in final), float, n)
    run = np.fromiter((o.end_s for o in final), float, n) - start
    wait = start - submit       # resubmitted: the first wait, the lost run, the retry's wait
    return first, wait, np.maximum(1.0, (wait + run) / np.maximum(run, TAU_S))


def killed_split(user_outcomes, outcomes) -> dict:
    """Where a policy's change in mean bounded slowdown against the users' requests
    (``user_outcomes``, same jobs) comes from: the jobs it killed, or the others; and the
    killed jobs' own wait and slowdown against the users' requests'. The two changes sum to
    the change in mean bounded slowdown."""
    first_u, wait_u, bsld_u = job_scores(user_outcomes)
    first, wait, bsld = job_scores(outcomes)
    by_seq = {o.job.seq: i for i, o in enumerate(first_u)}
    order = [by_seq[o.job.seq] for o in first]
    wait_u, bsld_u = wait_u[order], bsld_u[order]
    killed = np.array([o.killed for o in first])
    if not killed.any():
        return {"bsld_change_killed": 0.0, "bsld_change_others": round(float((bsld - bsld_u).mean()), 3)}
    n = len(first)
    return {"bsld_change_killed": round(float((bsld - bsld_u)[killed].sum() / n), 3),
            "bsld_change_others": round(float((bsld - bsld_u)[~killed].sum() / n), 3),
            "killed_mean_wait_s": round(float(wait[killed].mean())),
            "killed_mean_wait_s_user": round(float(wait_u[killed].mean())),
            "killed_mean_bsld": round(float(bsld[killed].mean()), 3),
            "killed_mean_bsld_user": round(float(bsld_u[killed].mean()), 3)}
