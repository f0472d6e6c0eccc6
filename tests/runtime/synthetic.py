"""Synthetic run tables from known functions (ground truth for the learners' tests).

``power_law_table``: runtime = scale · (0.01 · n² · m / p + 0.5)^exponent with multiplicative
log-normal noise (σ = 0.03) and two irrelevant inputs (``noise_a``, ``noise_b``), ``reps``
repetitions per configuration.
"""
from __future__ import annotations

import numpy as np

from hpcpredict.daemon.lab.runtime.dataset import parse_runs_csv

NOISE_SIGMA = 0.03


def truth(n, m, p, scale=1.0, exponent=1.0):
    return scale * (0.01 * n * n * m / p + 0.5) ** exponent


def power_law_table(n_configs: int = 120, reps: int = 3, seed: int = 0, scale: float = 1.0, exponent: float = 1.0):
    rng = np.random.default_rng(seed)
    lines = ["n,m,p,noise_a,noise_b,rep,runtime"]
    for _ in range(n_configs):
        n, m, p = int(rng.integers(10, 60)), int(rng.integers(1, 20)), int(rng.choice([1, 2, 4, 8]))
        a, b = rng.uniform(0, 1), int(rng.integers(0, 100))
        value = truth(n, m, p, scale, exponent)
        for rep in range(reps):
            lines.append(f"{n},{m},{p},{a:.4f},{b},{rep},{value * np.exp(rng.normal(0, NOISE_SIGMA)):.6f}")
    return parse_runs_csv("\n".join(lines), target="runtime")
