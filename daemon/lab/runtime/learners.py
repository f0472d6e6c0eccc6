"""Runtime learners registered by name: one declaration per learner, on its estimator class.

A learner is a scikit-learn estimator (``fit(X, y, groups=, feature_names=)``, ``predict``,
``predict_interval``) registered with :func:`register_learner`. A learner that can be served
names its served predictor (:mod:`hpcpredict.daemon.runtime.artifacts`, registered there by
artifact format) and packs itself into that predictor's arrays with ``artifact()``
(:func:`~.packing.pack`); the daemon loads the arrays without importing the lab.

>>> from hpcpredict.daemon.lab.runtime import model   # registers every learner
>>> sorted(LEARNERS.names())
['ann', 'blend', 'boosted-trees', 'extra-trees', 'gaussian-process', 'linear', 'log-linear', 'startup-steps']
>>> make_learner("log-linear", alpha=0.1).alpha
0.1
>>> make_learner("forest")
Traceback (most recent call last):
...
ValueError: unknown runtime learner 'forest' (known: ann, blend, boosted-trees, extra-trees, gaussian-process, linear, log-linear, startup-steps)
"""
from __future__ import annotations

from typing import Callable

from ...plugins import NamedRegistry
from ...runtime.artifacts import ServedPredictor

LEARNERS: NamedRegistry = NamedRegistry("runtime learner", ValueError)


class LearnerNotApplicable(ValueError):
    """The learner cannot model these runs (the start-up + steps model without a steps input):
    the learner choice skips it; asked for by name, it is a clear error."""


def register_learner(name: str, served: type[ServedPredictor] | None = None) -> Callable[[type], type]:
    """Class decorator: register an estimator class as learner ``name``; ``served`` is the
    predictor class that serves its artifacts (None: the learner cannot be served)."""
    if served is not None and served.learner != name:
        raise ValueError(f"learner {name!r} served by the predictor of {served.learner!r}")

    def register(cls: type) -> type:
        setattr(cls, "served", served)   # read back by packing.py (getattr: any class may be a learner)
        return LEARNERS.register(name)(cls)
    return register


def make_learner(name: str, **params):
    """A fresh, unfitted learner by name."""
    return LEARNERS.get(name)(**params)
