"""When will a job start: a forecast of the queue built on hpcpredict's runtime predictions.

- :mod:`.queue`: the live picture of the queue (:class:`QueueSnapshot` of :class:`QueuedJob`),
  read from Slurm off the request path and bounded;
- :mod:`.simulate`: the forecast (:func:`forecast_starts`): the queue run forward from the
  snapshot on the release's planning rule, runtimes drawn from each job's predictive
  distribution conditioned on how long it has already run; a start-time median and an 80 %
  interval per pending job, and beside it Slurm's own method (every job at its limit).

The types are the contract between the two and the ``When`` call (daemon/forecast/types.py).
"""
from .belief import belief_from_interval
from .types import QueuedJob, QueueSnapshot, RuntimeBelief, StartForecast

__all__ = ["QueueSnapshot", "QueuedJob", "RuntimeBelief", "StartForecast", "belief_from_interval"]
