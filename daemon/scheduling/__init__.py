"""Slurm's backfill as hpcpredict models it: EASY backfilling with a release's ``--time-min``
semantics (:mod:`.easy`, validated against real Slurm 22.05, 24.11 and 26.05 by
tests/slurm/test_sched_replay.py), on jobs as the scheduler sees them (:mod:`.jobs`).

Two callers: the lab's scheduling replay (daemon/lab/scheduling, a whole trace from its first
submission: :func:`simulate`) and the start-time forecast (daemon/forecast, the queue run on
from a picture of it: :func:`run_forward`). Pure: it knows nothing of predictors or of Slurm's
commands.
"""
from .easy import (BACKFILL_TIME_MIN, DEFAULT_RELEASE, HALFWAY_SINCE, HARD_END, MODES, PLANNING_RULES, SLURM_BF_RESOLUTION_S,
                   SLURM_RELEASES, SOFT_LIMIT_SINCE, SOFT_THEN_HALFWAY, Outcome, Running, Started, parse_release,
                   planning_rule, run_forward, semantics, simulate)
from .jobs import NO_REQUEST_LIMIT_S, SimJob

__all__ = [
    "BACKFILL_TIME_MIN", "DEFAULT_RELEASE", "HALFWAY_SINCE", "HARD_END", "MODES", "NO_REQUEST_LIMIT_S", "Outcome", "PLANNING_RULES",
    "Running", "SLURM_BF_RESOLUTION_S", "SLURM_RELEASES", "SOFT_LIMIT_SINCE", "SOFT_THEN_HALFWAY", "SimJob", "Started",
    "parse_release", "planning_rule", "run_forward", "semantics", "simulate",
]
