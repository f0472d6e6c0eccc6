"""The submissions the forecast keeper has seen appear: the arrivals model's source in the daemon.

The keeper reads squeue every interval anyway (:mod:`.keeper`); a job id it did not see at the
previous read is a new submission, remembered as the snapshot pictured it (size, limits, user,
belief; its submit time as squeue printed it). Bounded by age (the model's window,
:data:`.simulate.ARRIVAL_WINDOW_S`) and count (:data:`.simulate.MAX_RECENT`, the oldest dropped
first), so what a snapshot carries to the forecast's process stays bounded; no store query. What
it cannot see: a job submitted and ended between two reads, and one left out of the snapshot
(beyond ``[forecast] max_jobs``, or held) when it appeared; both make the later submissions
modelled fewer than the real ones.

>>> from .types import QueuedJob, QueueSnapshot
>>> def picture(at, *ids):
...     return QueueSnapshot(at, 8, "hard_end", tuple(QueuedJob(i, "ann", "p", 1, 600.0, None, at - 5, None, 0, None)
...                                                   for i in ids))
>>> seen = RecentSubmissions()
>>> seen.observe(picture(1000.0, "1"), {"1"}).recent      # the first read: what was there is not new
()
>>> later = seen.observe(picture(1030.0, "1", "2"), {"1", "2"})
>>> [job.job_id for job in later.recent], later.recent_from_s
(['2'], 1000.0)
"""
from __future__ import annotations

from dataclasses import replace

from .simulate import ARRIVAL_WINDOW_S, MAX_RECENT
from .types import QueuedJob, QueueSnapshot


class RecentSubmissions:
    """The jobs seen appear since the first read, at most ``window_s`` old and ``max_jobs`` many."""

    def __init__(self, window_s: float = ARRIVAL_WINDOW_S, max_jobs: int = MAX_RECENT):
        self.window_s, self.max_jobs = window_s, max_jobs
        self._present: set[str] | None = None      # the job ids of the previous read
        self._jobs: list[QueuedJob] = []           # in submission order
        self._since_s: float | None = None         # watched from (the first read, or the oldest dropped)

    def observe(self, snapshot: QueueSnapshot, present: set[str]) -> QueueSnapshot:
        """``snapshot`` with the recent submissions, after remembering its new jobs; ``present``:
        every job id the read listed (also those the snapshot left out)."""
        now = snapshot.taken_s
        if self._present is None or self._since_s is None:
            self._since_s = now
        else:
            since = self._since_s
            new = [replace(job, start_s=None, priority_rank=0) for job in snapshot.jobs
                   if job.job_id not in self._present and since <= job.submit_s <= now]
            if new:
                self._jobs = sorted(self._jobs + new, key=lambda job: (job.submit_s, job.job_id))
        self._present = set(present)
        oldest = now - self.window_s
        kept = [job for job in self._jobs if job.submit_s >= oldest]
        if len(kept) > self.max_jobs:
            kept = kept[-self.max_jobs:]
            self._since_s = max(self._since_s, kept[0].submit_s)
        self._jobs = kept
        return replace(snapshot, recent=tuple(kept), recent_from_s=self._since_s)
