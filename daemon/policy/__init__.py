"""The ``[policy]`` section's code: what hpcpredict does to a job's time limits, and why.

- :mod:`.limits`: the plan (:func:`plan_limits`, pure: the modes' rules, whole minutes) and
  the line the user reads (:func:`user_line`);
- :mod:`.controller`: the controller as it is (its release, its option, so its planning rule)
  and the mode the daemon answers with (:class:`PolicyMode`, refreshed off the request path);
- :mod:`.scope`: which jobs a site lets hpcpredict change (:func:`limits_withheld`).
"""
from .controller import PolicyMode
from .limits import DEFAULT_FLOOR_S, DEFAULT_SITE_CAP_S, MODES, LimitChange, ceil_minute, plan_limits, user_line
from .scope import limits_withheld

__all__ = ["DEFAULT_FLOOR_S", "DEFAULT_SITE_CAP_S", "MODES", "LimitChange", "PolicyMode", "ceil_minute",
           "limits_withheld", "plan_limits", "user_line"]
