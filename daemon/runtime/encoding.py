"""Input rows (dicts of typed values) to numeric feature vectors, and back to JSON.

Numeric inputs (floats, booleans as 0/1) are one column each; a categorical input is one-hot
over the categories seen in training (an unseen category encodes as all zeros).

>>> encoder = InputEncoder().fit([{"n": 10.0, "solver": "cg"}, {"n": 20.0, "solver": "gmres"}])
>>> encoder.feature_names
['n', 'solver=cg', 'solver=gmres']
>>> encoder.encode_one({"n": 15.0, "solver": "gmres"}).tolist()
[15.0, 0.0, 1.0]
>>> encoder.encode_one({"solver": "cg"}) is None   # a required input is missing
True
"""
from __future__ import annotations

from numbers import Real
from typing import Mapping, Sequence

import numpy as np

from ..errors import ModelArtifactError

MAX_CATEGORIES = 64


class InputEncoder:
    """Fitted description of the input columns: ``[(name, None | [categories]), ...]``."""

    def __init__(self, columns: Sequence[tuple[str, list[str] | None]] = ()):
        self.columns = [(name, None if cats is None else list(cats)) for name, cats in columns]
        self._index()

    def _index(self) -> None:
        self.feature_names: list[str] = []
        self._slots: list[tuple[str, int, dict[str, int] | None]] = []
        for name, cats in self.columns:
            start = len(self.feature_names)
            if cats is None:
                self.feature_names.append(name)
                self._slots.append((name, start, None))
            else:
                self.feature_names.extend(f"{name}={c}" for c in cats)
                self._slots.append((name, start, {c: i for i, c in enumerate(cats)}))

    def fit(self, rows: Sequence[Mapping[str, object]], names: Sequence[str] | None = None) -> "InputEncoder":
        names = list(names) if names is not None else sorted({k for row in rows for k in row})
        columns: list[tuple[str, list[str] | None]] = []   # (name, categories; None: numeric)
        for name in names:
            values = [row[name] for row in rows if name in row]
            if all(isinstance(v, (float, int, bool)) for v in values):
                columns.append((name, None))
            else:
                cats = sorted({str(v) for v in values})[:MAX_CATEGORIES]
                columns.append((name, cats))
        self.columns = columns
        self._index()
        return self

    @property
    def input_names(self) -> list[str]:
        return [name for name, _ in self.columns]

    def encode_one(self, inputs: Mapping[str, object], needed: Sequence[str] | None = None) -> np.ndarray | None:
        """One feature vector; None when an input in ``needed`` (default: all) is missing."""
        needed_set = set(self.input_names if needed is None else needed)
        vector = np.zeros(len(self.feature_names))
        for name, start, cats in self._slots:
            value = inputs.get(name)
            if value is None:
                if name in needed_set:
                    return None
                vector[start] = np.nan if cats is None else 0.0
                continue
            if cats is None:
                if not isinstance(value, Real):   # a word (or anything else) is no number
                    if name in needed_set:
                        return None
                    vector[start] = np.nan
                else:
                    vector[start] = float(value)
            else:
                slot = cats.get(str(value))
                if slot is not None:
                    vector[start + slot] = 1.0
        return vector

    def transform(self, rows: Sequence[Mapping[str, object]]) -> np.ndarray:
        """Matrix of all rows; a missing or non-numeric numeric input is NaN."""
        matrix = np.zeros((len(rows), len(self.feature_names)))
        for i, row in enumerate(rows):
            matrix[i] = self.encode_one(row, needed=())
        return matrix

    def to_json(self) -> list:
        return [[name, cats] for name, cats in self.columns]

    @classmethod
    def from_json(cls, data) -> "InputEncoder":
        try:
            columns = [(str(name), None if cats is None else [str(c) for c in cats]) for name, cats in data]
        except (TypeError, ValueError) as error:
            raise ModelArtifactError(f"bad input encoder description: {error}") from error
        return cls(columns)
