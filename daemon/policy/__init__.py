"""The ``[policy]`` section's code: what hpcpredict does to a job's time limits, and why.

- :mod:`.decision`: the one decision every caller uses (the daemon at submission and at
  allocation, the scheduling replay, ``explain``): :func:`decide`, :func:`decide_at_allocation`;
- :mod:`.limits`: the plan it applies (:func:`plan_limits`, pure: the modes' rules, whole
  minutes) and the line the user reads (:func:`user_line`);
- :mod:`.controller`: the controller as it is (:class:`ControllerFacts`: its release, its
  option, so its planning rule) and the mode resolved against it (:class:`PolicyMode`,
  refreshed off the request path);
- :mod:`.scope`: which jobs a site lets hpcpredict change (:func:`limits_withheld`);
- :mod:`.slurm_defaults`: what sbatch fills in for a job that names no partition or account,
  and each partition's MaxTime (:class:`SlurmDefaultsCache`, refreshed off the request path);
- :mod:`.allocation`: the TimeLimit the allocation answer may lower (:func:`plan_allocation_limit`,
  which :func:`decide_at_allocation` applies).
"""
from .allocation import plan_allocation_limit
from .controller import RULES, SOFT_OPTION, ControllerFacts, PolicyMode, parse_release, planning_rule, resolve_mode
from .decision import (NOT_AT_SUBMISSION, Decision, JobAsk, Predicted, decide, decide_at_allocation, limits_meaning,
                     mode_for)
from .limits import (DEFAULT_FLOOR_S, DEFAULT_SITE_CAP_S, MODES, LimitChange, ceil_minute, plan_limits, user_line,
                     within_max_time)
from .scope import limits_withheld
from .slurm_defaults import SlurmDefaults, SlurmDefaultsCache

__all__ = ["DEFAULT_FLOOR_S", "DEFAULT_SITE_CAP_S", "MODES", "NOT_AT_SUBMISSION", "RULES", "SOFT_OPTION",
           "ControllerFacts", "Decision", "JobAsk", "LimitChange", "PolicyMode", "Predicted", "ceil_minute",
           "decide", "decide_at_allocation", "limits_meaning", "limits_withheld", "mode_for", "parse_release",
           "plan_allocation_limit", "plan_limits", "planning_rule", "resolve_mode", "user_line", "within_max_time",
           "SlurmDefaults", "SlurmDefaultsCache"]
