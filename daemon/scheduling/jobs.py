"""A job as the backfill engine sees it (:mod:`.easy`): the replay's jobs and the forecast's."""
from __future__ import annotations

from dataclasses import dataclass

from ..policy import DEFAULT_SITE_CAP_S

# A job without --time gets the partition's MaxTime; Slurm plans an INFINITE one as a year.
NO_REQUEST_LIMIT_S = float(DEFAULT_SITE_CAP_S)


@dataclass(frozen=True, slots=True)
class SimJob:
    """One job as the scheduler sees it (seconds; ``seq`` = position in submission order)."""

    seq: int
    job_id: str
    submit_s: float
    procs: int
    work_s: float           # what it runs if no limit stops it
    request_s: float        # the user's --time (0 = none)
    limit_s: float          # the --time the policy gives it
    time_min_s: float = 0.0  # the --time-min the policy gives it (0 = none)
    retry_of: int = -1      # the seq of the killed job this one resubmits (-1: a first submission)

    @property
    def request_limit_s(self) -> float:
        """The limit the user's own request gives (the partition's when there is none)."""
        return self.request_s if self.request_s > 0 else NO_REQUEST_LIMIT_S

    def resubmission(self, seq: int, now: float) -> "SimJob":
        """This job submitted again at ``now`` by its user after a limit we set killed it: the
        user's own request and no ``--time-min`` (a user who was killed asks for what they
        asked before), the whole work again (nothing was checkpointed)."""
        return SimJob(seq, self.job_id, now, self.procs, self.work_s, self.request_s,
                      self.request_limit_s, retry_of=self.seq if self.retry_of < 0 else self.retry_of)
