"""Scheduling replay: what a walltime policy does to the queue of a real trace.

``workload`` turns a trace into jobs and reads the machine size from the SWF header; the
serving core's ``daemon/scheduling/easy.py`` (shared with the start-time forecast) replays jobs through EASY backfilling with Slurm's ``--time-min`` semantics (pure: it knows
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
  :func:`planning_rule`, :func:`parse_release` (what a release number means),
  :data:`SLURM_RELEASES` (one per behaviour), :data:`DEFAULT_RELEASE`, :data:`SOFT_LIMIT_SINCE`,
  :data:`HALFWAY_SINCE`, the planning rules :data:`HARD_END` and :data:`SOFT_THEN_HALFWAY`;
* the policies: :data:`POLICIES`, :data:`DEFAULT_POLICIES`, :func:`soft_risk_for`,
  :func:`online_predictions`, :func:`last_two_predictions`, :func:`hpcpredict_bound`,
  :func:`replay_facts` (the controller a replayed release shows the policies);
* the scores: :func:`killed_split`;
* the hindsight reference: :data:`GROUPINGS`, :data:`METHODS`, :func:`group_ids`,
  :func:`hindsight_jobs`, :func:`batch_ids`.
"""
from ...scheduling.easy import (DEFAULT_RELEASE, HALFWAY_SINCE, HARD_END, PLANNING_RULES, SLURM_RELEASES, SOFT_LIMIT_SINCE,
                   SOFT_THEN_HALFWAY, parse_release, planning_rule, semantics, simulate)
from .hindsight import GROUPINGS, METHODS, batch_ids, group_ids, hindsight_jobs
from .policies import (DEFAULT_POLICIES, POLICIES, hpcpredict_bound, last_two_predictions, online_predictions,
                       replay_facts, soft_risk_for)
from .replay import evaluate_scheduling, replay_jobs, replay_policies
from .forecast import evaluate_forecast
from .scores import killed_split
from .workload import Workload, sim_jobs, trace_machine_size

__all__ = [
    "DEFAULT_POLICIES", "DEFAULT_RELEASE", "GROUPINGS", "HALFWAY_SINCE", "HARD_END", "METHODS", "PLANNING_RULES",
    "POLICIES", "SLURM_RELEASES", "SOFT_LIMIT_SINCE", "SOFT_THEN_HALFWAY", "Workload", "batch_ids",
    "evaluate_forecast", "evaluate_scheduling", "group_ids", "hindsight_jobs", "hpcpredict_bound", "killed_split", "last_two_predictions",
    "online_predictions", "parse_release", "planning_rule", "replay_facts", "replay_jobs", "replay_policies", "semantics",
    "sim_jobs", "simulate", "soft_risk_for", "trace_machine_size",
]
