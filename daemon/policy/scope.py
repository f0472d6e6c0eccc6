"""Which jobs hpcpredict may change the limits of: the site's way to start small and back out.

A site turns limit changes on for one partition or a few accounts first (``[policy] partitions``,
``[policy] accounts``: empty = everywhere), and a user can be left out altogether
(``[policy] opt_out_users``). A job outside that scope is still predicted, recorded and told its
suggestion: only its limits are left as submitted. Decided here, once, from what the request
carries; the daemon's limit decision asks :func:`limits_withheld`.

>>> from hpcpredict.daemon.config import PolicyConfig
>>> limits_withheld(PolicyConfig(partitions=("batch",)), user="ann", account="phys", partition="debug")
'partition debug is not in [policy] partitions'
>>> limits_withheld(PolicyConfig(partitions=("batch",)), user="ann", account="phys", partition="batch")
''
>>> limits_withheld(PolicyConfig(opt_out_users=("ann",)), user="ann", account="phys", partition="batch")
'ann opted out ([policy] opt_out_users)'
"""
from __future__ import annotations


def limits_withheld(policy, *, user: str, account: str, partition: str) -> str:
    """Why this job's limits must stay as submitted; "" when hpcpredict may change them.

    A job naming several partitions is in scope only when every one of them is (Slurm picks one
    at scheduling). A request naming no partition or account (the hook sends the default
    partition's name; other clients may not) is out of a scope that lists names."""
    if user in policy.opt_out_users:
        return f"{user} opted out ([policy] opt_out_users)"
    if policy.partitions:
        names = [name.strip() for name in partition.split(",") if name.strip()]
        outside = [name for name in names if name not in policy.partitions]
        if not names or outside:
            return f"partition {outside[0] if outside else '(none named)'} is not in [policy] partitions"
    if policy.accounts and account not in policy.accounts:
        return f"account {account or '(none named)'} is not in [policy] accounts"
    return ""
