"""Plain records shared by ingestion, the store, the history models and the evaluators."""
from __future__ import annotations

from dataclasses import dataclass, field

# Final states, as Slurm names them; SWF status codes are mapped onto these.
COMPLETED, FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL = (
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL")
UNKNOWN = "UNKNOWN"


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One job, as history knows it (times are Unix seconds; 0 / -1 mean unknown).

    The one shape of a job across the product: the trace readers (SWF, sacct parsable/JSON/CSV),
    the store, the history models and the evaluators all read and write this type, and a
    validated request becomes one with :meth:`hpcpredict.daemon.jobspec.JobSpec.record`.
    At submission the same type describes the job to predict: ``runtime_s`` is then -1.
    ``application`` is the application key (executable, or job name when nothing better is
    known). ``requested_time_s`` is the user's walltime request (0 = none given).
    ``censored`` is True when the job was killed at its limit (TIMEOUT, or runtime >= request):
    its true runtime is only bounded below by ``runtime_s``.
    """

    job_id: str
    user: str
    submit_time: float
    runtime_s: float = -1.0
    requested_time_s: float = 0.0
    application: str = ""
    job_name: str = ""
    group: str = ""
    account: str = ""
    partition: str = ""
    qos: str = ""
    nodes: int = 0
    requested_procs: int = 0
    allocated_procs: int = 0
    start_time: float = -1.0
    end_time: float = -1.0
    state: str = UNKNOWN
    exit_code: int = 0
    inputs: dict = field(default_factory=dict, compare=False, hash=False)
    cluster: str = ""          # the Slurm cluster it ran on (sacct -M); "" = the site's only one

    @property
    def censored(self) -> bool:
        if self.state == TIMEOUT:
            return True
        return self.requested_time_s > 0 and self.runtime_s >= self.requested_time_s

    @property
    def procs(self) -> int:
        return self.requested_procs or self.allocated_procs
