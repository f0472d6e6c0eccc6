"""The runtime learners follow scikit-learn's estimator contract (``parametrize_with_checks``).

``__init__`` only stores parameters, validation happens in ``fit``, learned attributes end in
``_``, ``fit`` returns ``self``, predicting before fitting raises ``NotFittedError``,
``random_state`` is resolved in ``fit``, and clone/get_params/set_params round-trip: the
checks are scikit-learn's own, run on small settings so they stay fast.
"""
from __future__ import annotations

from sklearn.utils.estimator_checks import parametrize_with_checks

from hpcpredict.daemon.lab.runtime.ann import ANNEnsemble
from hpcpredict.daemon.lab.runtime.blend import BlendRuntime
from hpcpredict.daemon.lab.runtime.boosting import BoostedTreesRuntime
from hpcpredict.daemon.lab.runtime.gaussian_process import GaussianProcessRuntime
from hpcpredict.daemon.lab.runtime.linear import LinearRuntime
from hpcpredict.daemon.lab.runtime.loglinear import LogLinearRuntime
from hpcpredict.daemon.lab.runtime.trees import ExtraTreesRuntime

LEARNERS = [
    LogLinearRuntime(),
    ExtraTreesRuntime(n_estimators=10, calibration_folds=2),
    BoostedTreesRuntime(max_iter=20, calibration_folds=2),
    ANNEnsemble(n_members=3, max_epochs=30, patience=10),
    LinearRuntime(),
    GaussianProcessRuntime(restarts=0, calibration_folds=2, min_configurations=1),
    # (its ANN member is checked above on its own; here it would only make the checks slow)
    BlendRuntime(members=("log-linear", "boosted-trees"),
                 member_params={"log-linear": {"startup_shares": ()}, "boosted-trees": {"max_iter": 20}},
                 calibration_folds=2),
]


# Every check applies and passes: no expected failures. (Positive runtimes are declared with
# the ``target_tags.positive_only`` tag, missing inputs with ``input_tags.allow_nan``, so the
# checks generate data the learners accept.)
@parametrize_with_checks(LEARNERS)
def test_runtime_learner_follows_the_estimator_contract(estimator, check):
    check(estimator)
