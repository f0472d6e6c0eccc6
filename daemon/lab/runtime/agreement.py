"""Which users' runs of one application agree, so that a model pooled over them may serve others.

An application name is whatever a job claims (``#HPCPREDICT app=NAME``): a user's runs of it are
evidence about *her* jobs, and about another user's only as far as they say the same thing as
the other users' runs. The check is leave-one-user-out: each user's runs are predicted by a
log-log model (:mod:`.loglinear`, the trend every richer learner starts from, a few
milliseconds to fit) fitted on the *other* users' runs, and that error is compared with how well
the other users' runs predict their own unseen configurations (the same model, cross-validated by
configuration folds). A user whose runs the others predict :data:`AGREE_FACTOR` times worse than
they predict themselves (and worse than :data:`AGREE_FLOOR` in absolute terms) disagrees; the
user who disagrees most is left out and the check repeated on the rest, until everyone left
agrees. Counting users, not runs, is what makes a flood of short runs under one account weigh as
one user; a pool needs :data:`MIN_POOL_USERS` users (one user's runs alone say nothing about
anyone else's jobs): else there is no pooled model, each user with runs gets her own.

Errors are mean absolute log ratios, |log(predicted / observed)|: symmetric, so a 2-second run
predicted at 24 minutes weighs as much as the reverse (a percentage error would be 700 against 1).

:data:`AGREE_FACTOR` was chosen on the real LAMMPS runs (tests/data/runtime/lammps_melt.csv)
dealt among 2-6 honest users by configuration, 20 deals at random and 20 in contiguous ranges
of the problem size (a user who runs only the big cases is an extrapolation for the others):
the largest ratio of any honest user (her error over the others' own) was 1.38 (random) and
3.41 (contiguous); about twice that, 8, leaves short poisoning runs (1/700 of the victim's
runtimes on a third of his configurations) far outside: ratios 53 for the attacker, 46-60 for
the victim. On GROMACS (gromacs_water.csv) honest 2.22 / 7.76 (contiguous: just inside),
poisoned 58 / 55-76 (``benchmarks/dev/runtime/user_agreement.py``, 2026-12-02). The two
mistakes cost differently: an honest user kept out is still served (her own model) and only
the pool loses her runs, a poisoner let in sets other users' limits; so the factor is not
raised to give honest extrapolating users more room. What the check cannot see: runs that
differ from the others' by less than that (e.g. runtimes scaled by 2 on the same inputs) join
the pool; the publish check (:func:`~.training.worse_than_serving`) is the next line.

>>> import numpy as np
>>> from hpcpredict.daemon.lab.runtime.dataset import parse_runs_csv
>>> lines = [f"{n},{u},{n * 2.0 * (1 + 0.02 * (i % 3))}" for i, (n, u) in
...          enumerate((n, u) for n in range(2, 40) for u in ("ann", "bob"))]
>>> lines += [f"{n},eve,1.0" for n in range(2, 40, 3)]
>>> table = parse_runs_csv("n,_user,t\\n" + "\\n".join(lines), target="t")
>>> check = agreeing_users(table, np.arange(len(table.y)), inputs=["n"])
>>> check.pooled, sorted(check.kept_out)
(['ann', 'bob'], ['eve'])
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .dataset import RunTable
from .learners import LearnerNotApplicable
from .model import RuntimeModel
from .selection import out_of_fold_predictions

AGREE_FACTOR = 8.0          # a user's leave-one-user-out error over the others' own held-out error
AGREE_FLOOR = math.log(1.25)   # below a 25 % typical error nobody is kept out
MIN_POOL_USERS = 2
CHECK_LEARNER = "log-linear"
# first order, no start-up term, no interval: the trend alone (one ridge fit, milliseconds)
CHECK_PARAMS = {"interactions": False, "calibration_folds": 0, "startup_shares": ()}
CHECK_FOLDS = 5


@dataclass
class Agreement:
    """The users whose runs form the pooled model, and why each other one was kept out."""
    pooled: list[str]
    kept_out: dict[str, str] = field(default_factory=dict)   # user -> the measured disagreement

    def as_json(self) -> dict:
        return {"pooled_users": list(self.pooled), "kept_out": dict(self.kept_out),
                "learner": CHECK_LEARNER, "factor": AGREE_FACTOR, "floor": round(AGREE_FLOOR, 4)}


def _log_errors(predicted: np.ndarray, observed: np.ndarray) -> float:
    return float(np.mean(np.abs(np.log(np.maximum(predicted, 1e-9) / observed))))


def _predicted_by(table: RunTable, train: np.ndarray, test: np.ndarray, inputs: list[str]) -> float:
    """Mean |log error| on ``test`` of the check model fitted on ``train`` (inf: cannot be fitted)."""
    if train.size < 2:
        return math.inf
    try:
        model = RuntimeModel(CHECK_LEARNER, CHECK_PARAMS, inputs).fit(table, train)
        return _log_errors(model.predict([table.rows[i] for i in test]), table.y[test])
    except (LearnerNotApplicable, ValueError, np.linalg.LinAlgError):
        return math.inf


def _own_error(table: RunTable, rows: np.ndarray, inputs: list[str]) -> float | None:
    """How well these runs predict their own unseen configurations (None: too few to say)."""
    predicted = out_of_fold_predictions(table, rows, CHECK_LEARNER, CHECK_PARAMS, inputs=inputs, folds=CHECK_FOLDS)
    return None if predicted is None else _log_errors(predicted, table.y[rows])


def user_disagreement(table: RunTable, rows: np.ndarray, *, inputs: list[str]) -> dict[str, tuple[float, float]]:
    """Each user's disagreement with the other users among ``rows``: (her runs' mean |log error|
    predicted by the others' runs, the limit it is held to: :data:`AGREE_FACTOR` x the others'
    error on their own unseen configurations, at least :data:`AGREE_FLOOR`)."""
    if table.users is None:
        raise ValueError("the run table names no users")
    users = table.users[rows]
    result = {}
    for user in sorted(set(users.tolist())):
        mine, others = rows[users == user], rows[users != user]
        own = _own_error(table, others, inputs)
        result[user] = (_predicted_by(table, others, mine, inputs),
                        max(AGREE_FACTOR * own, AGREE_FLOOR) if own is not None else AGREE_FLOOR)
    return result


def agreeing_users(table: RunTable, rows: np.ndarray, *, inputs: list[str]) -> Agreement:
    """The users among ``rows`` whose runs agree (see the module's docstring)."""
    if table.users is None:
        raise ValueError("the run table names no users")
    remaining = sorted(set(table.users[rows].tolist()))
    result = Agreement(pooled=[])
    while len(remaining) >= MIN_POOL_USERS:
        measured = user_disagreement(table, rows[np.isin(table.users[rows], remaining)], inputs=inputs)
        worst = max(remaining, key=lambda user: measured[user][0] / measured[user][1])
        by_others, limit = measured[worst]
        if by_others <= limit:
            result.pooled = remaining
            return result
        result.kept_out[worst] = (f"the other users' runs predict hers with mean |log error| {by_others:.3f}, "
                                  f"over the limit {limit:.3f} ({AGREE_FACTOR:g} x their error on their own "
                                  "unseen configurations)")
        remaining = [u for u in remaining if u != worst]
    for user in remaining:   # too few users left to pool: each one is served her own runs
        result.kept_out.setdefault(user, f"fewer than {MIN_POOL_USERS} users whose runs agree")
    return result
