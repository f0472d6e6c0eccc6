"""Scheduling replay: what a walltime policy does to the queue of a real trace.

``workload`` turns a trace into jobs and reads the machine size from the SWF header; ``easy``
replays jobs through EASY backfilling with Slurm's ``--time-min`` semantics (pure: it knows
nothing of predictors); ``policies`` sets each job's limits (the users' requests, our hook's
policy through :func:`hpcpredict.daemon.policy.plan_limits` on the daemon's own
answers, the oracle...);
``scores`` scores a replay (a killed job done at its kill, or, when the replay resubmits
killed jobs, each job from its first submission to its final end, and where a policy's change
comes from); ``hindsight`` is a reference, not a policy: the bound a job's group's runtimes
over the whole trace would give (the ``scheduling_ceiling`` benchmark's ceiling).

What the family offers, and what the benchmarks and ``hpcpredict evaluate scheduling`` call:

* the workload: :class:`Workload`, :func:`sim_jobs`, :func:`trace_machine_size`;
* the replay: :func:`evaluate_scheduling` (the command's whole run), :func:`replay_policies`,
  :func:`replay_jobs`; :func:`simulate` (EASY backfilling), :func:`semantics`,
  :data:`SLURM_RELEASES`, :data:`SOFT_LIMIT_SINCE`;
* the policies: :data:`POLICIES`, :data:`DEFAULT_POLICIES`, :data:`SOFT_RISK`,
  :func:`online_predictions`, :func:`last_two_predictions`, :func:`hpcpredict_bound`;
* the scores: :func:`killed_split`;
* the hindsight reference: :data:`GROUPINGS`, :data:`METHODS`, :func:`group_ids`,
  :func:`hindsight_jobs`, :func:`batch_ids`.
"""
from .easy import SLURM_RELEASES, SOFT_LIMIT_SINCE, semantics, simulate
from .hindsight import GROUPINGS, METHODS, batch_ids, group_ids, hindsight_jobs
from .policies import (DEFAULT_POLICIES, POLICIES, SOFT_RISK, hpcpredict_bound, last_two_predictions,
                       online_predictions)
from .replay import evaluate_scheduling, replay_jobs, replay_policies
from .scores import killed_split
from .workload import Workload, sim_jobs, trace_machine_size

__all__ = [
    "DEFAULT_POLICIES", "GROUPINGS", "METHODS", "POLICIES", "SLURM_RELEASES", "SOFT_LIMIT_SINCE", "SOFT_RISK",
    "Workload", "batch_ids", "evaluate_scheduling", "group_ids", "hindsight_jobs", "hpcpredict_bound",
    "killed_split", "last_two_predictions", "online_predictions", "replay_jobs", "replay_policies", "semantics",
    "sim_jobs", "simulate", "trace_machine_size",
]
