"""The ``When`` call's answers (:class:`StartEstimate`), from what :class:`~.keeper.ForecastKeeper` keeps.

Who may ask about which job is decided here, once, for every listener: an ordinary user about
the jobs the queue says are theirs; a privileged caller (root, the Slurm user, admins) about any.
"""
from __future__ import annotations

import math
import time

from ..errors import InvalidRequest, PermissionDenied
from ..jobspec import JobSpec
from ...proto.v1 import hpcpredict_pb2 as pb
from .keeper import CAVEATS, ForecastUnavailable, Kept
from .queue import SlurmJob
from .types import QueuedJob, RuntimeBelief, StartForecast

MAX_JOB_ID_CHARS = 64
NEW = "(not yet submitted)"      # the job id of a hypothetical job in the forecast


def submitted(keeper, job_id: str, user: str | None, privileged: bool) -> pb.StartEstimate:
    if len(job_id) > MAX_JOB_ID_CHARS or not job_id.replace("_", "").isdigit():
        raise InvalidRequest("job_id", f"not a Slurm job id: {job_id[:MAX_JOB_ID_CHARS]!r}")
    kept = keeper.latest()
    job = kept.job(job_id)
    age = time.time() - kept.snapshot.taken_s
    if job is None:
        if job_id in kept.held:
            raise ForecastUnavailable(f"job {job_id} is held (priority 0): it starts only once released")
        raise ForecastUnavailable(f"job {job_id} is not running or pending in the queue as read {age:.0f} s ago"
                                  + (f" (or it is beyond the first [forecast] max_jobs, {kept.left_out} pending "
                                     f"jobs left out)" if kept.left_out else ""))
    if not privileged and job.user != user:
        raise PermissionDenied(f"job {job_id} is not yours: you ({user}) may only ask about your own jobs")
    if job.start_s is not None:
        return _reply(kept, job, "RUNNING", None, started_s=job.start_s)
    forecast = kept.forecasts.get(job_id)
    if forecast is None:
        raise ForecastUnavailable(f"the forecast gave no start for job {job_id}")
    return _reply(kept, job, "PENDING", forecast, squeue_start_s=kept.squeue_starts.get(job_id, 0.0))


def hypothetical(keeper, spec: JobSpec, belief: RuntimeBelief | None, uid: int) -> pb.StartEstimate:
    now = time.time()
    limit = float(spec.time_limit_s) if spec.time_limit_s and not spec.time_limit_unlimited else math.inf
    extra = QueuedJob(job_id=NEW, user=spec.user, partition=spec.partition, cpus=max(1, spec.record().requested_procs),
                      time_limit_s=limit, time_min_s=float(spec.time_min_s) or None, submit_s=now, start_s=None,
                      priority_rank=0, belief=belief)
    kept, forecast = keeper.hypothetical(extra, uid)
    return _reply(kept, extra, "NEW", forecast, job_id="")


def _reply(kept: Kept, job: QueuedJob, state: str, forecast: StartForecast | None, *, job_id: str | None = None,
           started_s: float = 0.0, squeue_start_s: float = 0.0) -> pb.StartEstimate:
    now = time.time()
    reply = pb.StartEstimate(job_id=job.job_id if job_id is None else job_id, user=job.user, state=state,
                             started_s=started_s, squeue_start_s=squeue_start_s, snapshot_s=kept.snapshot.taken_s,
                             snapshot_age_s=max(0.0, now - kept.snapshot.taken_s),
                             planning_rule=kept.snapshot.planning_rule, caveats=CAVEATS)
    if forecast is not None:
        reply.median_start_s = forecast.median_start_s
        reply.low80_start_s = forecast.low80_start_s
        reply.high80_start_s = forecast.high80_start_s
        reply.slurm_start_s = forecast.slurm_start_s or 0.0
        reply.runs = forecast.runs
    return reply


def spec_of(job: SlurmJob, cluster: str) -> JobSpec:
    """What the walltime model is asked about a queued job the hooks never predicted."""
    finite = math.isfinite(job.time_limit_s)
    return JobSpec(user=job.user, application="", partition=job.partition, cluster=cluster, ntasks=job.cpus,
                   time_limit_s=int(job.time_limit_s) if finite else 0, time_limit_unlimited=not finite,
                   submit_time=job.submit_s, job_id=job.job_id)
