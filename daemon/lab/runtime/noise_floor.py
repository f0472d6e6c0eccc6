"""The noise floor of a code's runs when runs were measured in blocks (passes, days, machines).

A run shares a block effect with the runs measured beside it that its configuration's other
repetitions may not share: :func:`between_block_sigma` estimates that effect's size from the
configuration-mean residuals of a model, :func:`repetition_mape_with_block_effect` the MAPE
floor it leaves (:func:`~.accuracy.repetition_disagreement` is the floor without it).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import f as f_distribution
from scipy.stats import norm


def between_block_sigma(frame: pd.DataFrame, column: str) -> dict:
    """Random-effects split of the configuration-mean log residuals into block effects and the rest.

    ``frame`` has one row per configuration with its block and mean residual ``column``. The
    variance of the block means beyond what ``n`` configurations' own scatter explains (one-way
    ANOVA, method of moments) is the variance of a block effect; 0 when there is none.
    """
    by_block = frame.groupby("block")[column]
    means, sizes = by_block.mean(), by_block.size()
    within = frame[column] - frame["block"].map(means)
    k, n = means.size, len(frame)
    ms_within = float((within ** 2).sum() / max(n - k, 1))
    ms_between = float((sizes * (means - frame[column].mean()) ** 2).sum() / max(k - 1, 1))
    n0 = (n - (sizes ** 2).sum() / n) / max(k - 1, 1)
    variance = max(0.0, (ms_between - ms_within) / n0)
    f = ms_between / ms_within if ms_within > 0 else float("inf")
    return {"sigma": math.sqrt(variance), "F": f, "p": float(f_distribution.sf(f, k - 1, n - k)),
            "blocks": int(k), "sigma_config_residual": math.sqrt(ms_within)}


def repetition_mape_with_block_effect(frame: pd.DataFrame, sigma_b: float) -> float:
    """MAPE of predicting each run by its configuration's other repetitions, when the run also
    carries a block effect b ~ N(0, sigma_b²) that those repetitions (same block) share not.

    The within-block errors are the measured ones (their heavy tails kept); the block effect is
    integrated over its quantiles. sigma_b = 0 gives ``repetition_mape``.
    """
    sums, counts = frame.groupby("config")["_runtime"].transform("sum"), frame.groupby("config")["_runtime"].transform("size")
    repeated = counts > 1
    # Predicted / measured, as ``repetition_mape`` scores it; the run's block effect b divides the
    # ratio, and b is symmetric: multiplying by e^(σx) over the quadrature nodes is the same.
    ratio = (((sums - frame["_runtime"]) / (counts - 1)) / frame["_runtime"])[repeated].to_numpy()
    # b at 400 equal-probability quantiles of N(0, σ²) (|·| has a kink: Gauss-Hermite is off by 4 %).
    nodes = norm.ppf((np.arange(400) + 0.5) / 400)
    return float(np.abs(ratio[:, None] * np.exp(sigma_b * nodes[None, :]) - 1).mean())
