"""Accuracy metrics of seed 004: MMRE, Pred25, RCC.

e = (predicted - measured) / measured; MMRE = mean |e|; Pred25 = share with |e| <= 0.25;
RCC = concordant pairs / (m (m-1) / 2), a pair being concordant when measured and
predicted order it the same way strictly (ties count as not concordant, as in the paper).

>>> import numpy as np
>>> t = np.array([1.0, 2.0, 4.0]); p = np.array([1.1, 1.0, 5.0])
>>> round(mmre(t, p), 4), round(pred25(t, p), 4), round(rcc(t, p), 4)
(0.2833, 0.6667, 0.6667)
"""
from __future__ import annotations

import numpy as np

_CHUNK = 2048


def relative_errors(measured: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    measured = np.asarray(measured, dtype=float)
    return (np.asarray(predicted, dtype=float) - measured) / measured


def mmre(measured, predicted) -> float:
    return float(np.mean(np.abs(relative_errors(measured, predicted))))


def pred25(measured, predicted) -> float:
    return float(np.mean(np.abs(relative_errors(measured, predicted)) <= 0.25))


def rcc(measured, predicted) -> float:
    """Share of concordant pairs; chunked so memory stays O(chunk * m)."""
    t = np.asarray(measured, dtype=float)
    p = np.asarray(predicted, dtype=float)
    m = t.size
    if m < 2:
        return float("nan")
    concordant = 0
    for start in range(0, m, _CHUNK):
        dt = np.sign(t[start:start + _CHUNK, None] - t[None, :])
        dp = np.sign(p[start:start + _CHUNK, None] - p[None, :])
        concordant += int(np.count_nonzero((dt == dp) & (dt != 0)))
    return concordant / 2 / (m * (m - 1) / 2)


def scores(measured, predicted) -> dict[str, float]:
    return {"mmre": mmre(measured, predicted), "pred25": pred25(measured, predicted),
            "rcc": rcc(measured, predicted), "n": int(np.size(measured))}
