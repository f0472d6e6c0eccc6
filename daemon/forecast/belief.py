"""A job's runtime belief from what the daemon stores of its prediction (one owner: the forecast in
the daemon and the replay's measurement both build beliefs here)."""
from __future__ import annotations

import math
from statistics import NormalDist

from .types import RuntimeBelief

_MIN_SIGMA = 0.05      # a stored interval of zero width is not certainty: keep a little spread


def belief_from_interval(runtime_s: float, low_s: float, high_s: float, coverage: float) -> RuntimeBelief | None:
    """Log-normal belief centred on the estimate whose central ``coverage`` interval is [low, high].

    None when there is no estimate. Without a usable interval (no coverage, bounds missing or
    inverted) the spread is that of a 2x error at 80 % (ln 2 / z_0.9)."""
    if not (runtime_s > 0 and math.isfinite(runtime_s)):
        return None
    if 0 < coverage < 1 and 0 < low_s < high_s and math.isfinite(high_s):
        z = NormalDist().inv_cdf(0.5 + coverage / 2)
        sigma = (math.log(high_s) - math.log(low_s)) / (2 * z)
    else:
        sigma = math.log(2) / NormalDist().inv_cdf(0.9)
    return RuntimeBelief(median_s=float(runtime_s), log_sigma=max(_MIN_SIGMA, float(sigma)))
