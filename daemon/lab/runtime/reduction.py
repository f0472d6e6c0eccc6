"""Feature reduction of seed 000: by time (cheap enough to wait for) and by importance.

>>> import numpy as np
>>> reduce_by_time({"n": np.array([0.1, 0.2]), "total": np.array([9.9, 19.0])},
...                runtime_s=np.array([10.0, 20.0]))
['n']
>>> keep_by_importance(np.array([0.6, 0.05, 0.3, 0.05]), threshold=0.85)
[0, 2]
"""
from __future__ import annotations

import numpy as np

from .dataset import RunTable

DEFAULT_TIME_SHARE = 0.05
DEFAULT_IMPORTANCE = 0.95


def reduce_by_time(report_times: dict[str, np.ndarray], *, runtime_s: np.ndarray,
                   max_share: float = DEFAULT_TIME_SHARE) -> list[str]:
    """Runtime features whose median report time is at most ``max_share`` of the runtime.

    A feature is worth waiting for only if it arrives early: the seed drops features whose
    cost exceeds 5 % of the runtime. Runs that never reported a feature count as "too late".
    """
    kept = []
    for name, times in report_times.items():
        share = np.asarray(times, dtype=float) / np.asarray(runtime_s, dtype=float)
        share = np.where(np.isnan(share), np.inf, share)
        if len(share) and float(np.median(share)) <= max_share:
            kept.append(name)
    return sorted(kept)


def keep_by_importance(importances: np.ndarray, *, threshold: float = DEFAULT_IMPORTANCE) -> list[int]:
    """Indices of the most important features up to ``threshold`` cumulative importance.

    Always at least one feature; ties broken by index; returned in index order.
    """
    importances = np.asarray(importances, dtype=float)
    if importances.size == 0:
        return []
    total = importances.sum()
    if not np.isfinite(total) or total <= 0:
        return list(range(importances.size))
    order = np.argsort(-importances, kind="stable")
    cumulative = np.cumsum(importances[order]) / total
    count = int(np.searchsorted(cumulative, threshold - 1e-12) + 1)
    return sorted(order[:min(count, importances.size)].tolist())


def usable_inputs(table: RunTable, rows: np.ndarray, *, time_share: float | None) -> tuple[list[str], list[str], list[str]]:
    """(inputs to use, runtime features kept, runtime features dropped by time).

    ``time_share=None`` drops every runtime feature (submit-time model).
    """
    features = [name for name in table.report_times if name in table.inputs]
    if time_share is None:
        kept = []
    else:
        kept = reduce_by_time({name: table.report_times[name][rows] for name in features},
                              runtime_s=table.y[rows], max_share=time_share)
    dropped = sorted(set(features) - set(kept))
    return [name for name in table.inputs if name not in dropped], kept, dropped
