"""A runtime model of one application: input encoder + learner, fitted from a run table.

>>> from hpcpredict.daemon.lab.runtime.dataset import parse_runs_csv
>>> rows = "\\n".join(f"{n},{s},{n * (2 if s == 'cg' else 3)}" for n in range(1, 30) for s in ("cg", "lu"))
>>> table = parse_runs_csv("n,solver,runtime\\n" + rows, target="runtime")
>>> model = RuntimeModel(learner="extra-trees", params={"n_estimators": 30, "random_state": 0}).fit(table)
>>> model.required_inputs
['n', 'solver']
>>> round(float(model.predict([{"n": 20.0, "solver": "lu"}])[0]))
60
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ...runtime.encoding import InputEncoder
# Every learner module, so that each learner is registered under its name (make_learner).
from . import ann, blend, boosting, gaussian_process, linear, loglinear, startup_steps, trees  # noqa: F401
from .dataset import RunTable
from .learners import make_learner


class RuntimeModel:
    """Encoder + learner; ``required_inputs`` are the inputs the kept features need."""

    def __init__(self, learner: str = "extra-trees", params: Mapping | None = None,
                 inputs: Sequence[str] | None = None):
        self.learner = learner
        self.params = dict(params or {})
        self.inputs = None if inputs is None else list(inputs)

    def fit(self, table: RunTable, rows: np.ndarray | None = None) -> "RuntimeModel":
        """Fit on ``table`` (or only on the row indices ``rows``)."""
        rows = np.arange(len(table.y)) if rows is None else np.asarray(rows)
        names = self.inputs if self.inputs is not None else table.inputs
        records = [table.rows[i] for i in rows]
        # Derived inputs are part of the model: a job's are computed from its stated inputs.
        self.derived_ = table.derived if table.derived else None
        self.encoder_ = InputEncoder().fit(records, names)
        X = self.encoder_.transform(records)
        # What each numeric input spanned in training: a prediction far outside says so.
        self.input_ranges_ = {}
        for name, cats in self.encoder_.columns:
            column = X[:, self.encoder_.feature_names.index(name)] if cats is None else None
            if column is not None and np.isfinite(column).any():
                self.input_ranges_[name] = (float(np.nanmin(column)), float(np.nanmax(column)))
        self.estimator_ = make_learner(self.learner, **self.params)
        self.estimator_.fit(X, table.y[rows], groups=table.groups[rows],
                            feature_names=self.encoder_.feature_names)
        return self

    def matrix(self, rows: Sequence[Mapping[str, object]]) -> np.ndarray:
        derived = getattr(self, "derived_", None)
        return self.encoder_.transform([derived.apply(row) for row in rows] if derived else rows)

    def predict(self, rows: Sequence[Mapping[str, object]]) -> np.ndarray:
        return self.estimator_.predict(self.matrix(rows))

    def predict_interval(self, rows, coverage: float = 0.8):
        return self.estimator_.predict_interval(self.matrix(rows), coverage)

    @property
    def kept_features(self) -> list[str]:
        return list(getattr(self.estimator_, "kept_feature_names_", self.encoder_.feature_names))

    @property
    def required_inputs(self) -> list[str]:
        """Inputs that a prediction cannot do without (those behind the kept features)."""
        kept_columns = getattr(self.estimator_, "kept_inputs_", range(len(self.encoder_.feature_names)))
        used = {self.encoder_.feature_names[i].split("=", 1)[0] for i in kept_columns}
        return [name for name in self.encoder_.input_names if name in used]
