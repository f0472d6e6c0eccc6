"""The served model's two functions that SciPy used to give, checked against SciPy.

The daemon no longer imports SciPy (490 modules, most of its start; tests/daemon/test_layering.py
holds that): the ANN's logistic activation is numpy's, the normal quantile the standard
library's ``statistics.NormalDist``. SciPy stays a dependency of the lab and of these tests.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import norm

from hpcpredict.daemon.runtime.compiled_ann import logistic
from hpcpredict.daemon.runtime.conformal import conformal_multiplier

TINY = np.finfo(float).tiny
ULP = np.finfo(float).eps


def test_logistic_is_scipys_expit_to_a_few_ulp_over_every_magnitude():
    x = np.concatenate([np.linspace(-700, 700, 140_001), np.linspace(-40, 40, 80_001),
                        -np.logspace(-300, 308, 2_000), np.logspace(-300, 308, 2_000),
                        [0.0, -0.0, 5e-324, -5e-324, 36.7, 37.5, -36.7, -37.5]])
    with np.errstate(over="raise", divide="raise", invalid="raise"):   # underflow to 0 is the answer
        ours = logistic(x)
    theirs = expit(x)
    normal = theirs >= TINY             # below it SciPy flushes to 0; ours keeps the subnormal
    assert np.all(np.abs(ours[normal] - theirs[normal]) <= 4 * ULP * theirs[normal])
    assert np.all(np.abs(ours[~normal]) <= TINY)
    assert np.all((ours >= 0) & (ours <= 1))


def test_logistic_at_the_extremes():
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        out = logistic(np.array([-np.inf, np.inf, -1e308, 1e308, -800.0, 800.0, 0.0]))
    assert out.tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.5]
    assert np.isnan(logistic(np.array([np.nan]))).all()


def test_logistic_keeps_the_layer_shape():
    a = np.linspace(-5, 5, 24).reshape(2, 3, 4)
    assert logistic(a).shape == (2, 3, 4)
    np.testing.assert_allclose(logistic(a), expit(a), rtol=4 * ULP)


@pytest.mark.parametrize("coverage", [5e-324, 1e-12, 1e-6, 0.01, 0.1, 0.5, 0.6827, 0.8, 0.9, 0.95, 0.99,
                                      1 - 1e-6, 1 - 1e-12, 1 - 2 ** -52, 1 - 2 ** -53])
def test_multiplier_without_scores_is_scipys_normal_quantile(coverage):
    # SciPy's own upper tail (isf), exact where 0.5 + coverage / 2 would round to 1
    expected = norm.isf((1 - coverage) / 2)
    assert conformal_multiplier(np.array([]), coverage) == pytest.approx(expected, rel=1e-14, abs=1e-300)


def test_multiplier_without_scores_matches_ppf_across_the_range():
    coverages = np.linspace(1e-4, 1 - 1e-4, 2_001)
    ours = np.array([conformal_multiplier(np.array([]), c) for c in coverages])
    np.testing.assert_allclose(ours, norm.ppf(0.5 + coverages / 2), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("coverage", [0.0, 1.0, -0.1, 1.5])
def test_multiplier_refuses_a_coverage_outside_the_open_unit_interval(coverage):
    with pytest.raises(ValueError, match="coverage"):
        conformal_multiplier(np.array([]), coverage)
