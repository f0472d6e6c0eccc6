"""Extra-P style regression modeler: recovers exponents, combines parameters, strong scaling."""
import json

import numpy as np
import pytest

from hpcpredict.daemon.lab.scaling.measurements import InsufficientMeasurements, parse_jsonlines
from hpcpredict.daemon.lab.scaling.regression import (
    covering_families, fit_regression, rank_single_parameter)


@pytest.mark.parametrize("pair", [(0.5, 0), (1.0, 1), (2.0, 0), (1.5, 2), (0.0, 1), (3.0, 0)])
def test_single_parameter_recovers_exponents_without_noise(pair):
    x = np.array([4.0, 8, 16, 32, 64])
    y = 12.0 + 0.7 * x ** pair[0] * np.log2(x) ** pair[1]
    assert rank_single_parameter(x, y)[0].pair == pair


def _lines(function, ps, ns, noise=0.0, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for p in ps:
        for n in ns:
            value = function(p, n)
            out.append(json.dumps({"params": {"p": p, "n": n},
                                   "value": list(value * (1 + rng.uniform(-noise / 2, noise / 2, 5)))}))
    return out


def test_two_parameters_multiplicative_and_additive():
    ps, ns = (2, 4, 8, 16, 32), (10, 20, 30, 40, 50)
    mult = parse_jsonlines(_lines(lambda p, n: 3 + 0.5 * p * n ** 2, ps, ns))[("<root>", "time")]
    fit = fit_regression(mult)
    assert len(fit.function.terms) == 1
    assert fit.function.terms[0].exponents == {"n": (2.0, 0), "p": (1.0, 0)}
    add = parse_jsonlines(_lines(lambda p, n: 3 + 0.5 * p + 2 * np.log2(n), ps, ns))[("<root>", "time")]
    fit = fit_regression(add)
    found = sorted(str(sorted(t.exponents.items())) for t in fit.function.terms)
    assert found == sorted([str([("p", (1.0, 0))]), str([("n", (0.0, 1))])])
    assert fit.cv_smape < 1e-6


def test_strong_scaling_uses_negative_exponents():
    lines = [json.dumps({"params": {"p": p}, "value": [5 + 400 / p, 5 + 400 / p]}) for p in (1, 2, 4, 8, 16, 32)]
    fit = fit_regression(parse_jsonlines(lines)[("<root>", "time")])
    assert fit.function.terms[0].exponents == {"p": (-1.0, 0)}
    assert fit.function.evaluate({"p": 64.0}) == pytest.approx(5 + 400 / 64)
    no_negative = fit_regression(parse_jsonlines(lines)[("<root>", "time")], negative=False)
    assert all(t.exponents["p"][0] >= 0 for t in no_negative.function.terms)


def test_noisy_data_still_close_and_noise_estimated():
    data = parse_jsonlines(_lines(lambda p, n: 10 + 2 * p ** 1.5 + 0 * n, (4, 8, 16, 32, 64),
                                  (1, 2, 3, 4, 5), noise=0.1))[("<root>", "time")]
    fit = fit_regression(data)
    assert 0.05 < fit.noise < 0.15      # rrd of +-5 % noise: about 10 %
    assert fit.function.lead_exponents()["p"][0] == pytest.approx(1.5, abs=0.5)


def test_sparse_cross_design_needs_five_per_line():
    # Two lines of 4 points each: the rule must refuse, naming the parameter.
    lines = [json.dumps({"params": {"p": p, "n": 10}, "value": [p]}) for p in (1, 2, 4, 8)]
    lines += [json.dumps({"params": {"p": 1, "n": n}, "value": [n]}) for n in (20, 30, 40, 50, 60)]
    data = parse_jsonlines(lines)[("<root>", "time")]
    with pytest.raises(InsufficientMeasurements, match="'p'.*at least 5"):
        fit_regression(data, source="cross.jsonl")


def test_covering_families_counts():
    assert len(covering_families(["a"])) == 1
    assert len(covering_families(["a", "b"])) == 5   # a+b, ab, a+ab, b+ab, a+b+ab
    assert covering_families([]) == [()]


def test_strong_scaling_u_shape_gets_two_terms():
    # work / p shrinks, start-up grows with p: one PMNF term cannot bend back up
    ps = (1, 2, 3, 4, 6, 8, 12, 16, 24)
    lines = [json.dumps({"params": {"p": p}, "value": [0.9 + 6.0 / p + 0.05 * p]}) for p in ps]
    fit = fit_regression(parse_jsonlines(lines)[("<root>", "time")])
    exponents = sorted(t.exponents["p"] for t in fit.function.terms)
    assert exponents == [(-1.0, 0), (1.0, 0)]
    assert fit.function.evaluate({"p": 48.0}) == pytest.approx(0.9 + 6 / 48 + 0.05 * 48, rel=1e-6)
    # five points are too few for four coefficients plus cross-validation: stays one term
    few = fit_regression(parse_jsonlines(lines[:5])[("<root>", "time")])
    assert len(few.function.terms) == 1


def test_combine_margin_keeps_the_simpler_model_on_near_ties():
    from hpcpredict.daemon.lab.scaling.regression import combine

    ps, ns = (2, 4, 8, 16, 32), (10, 20, 30, 40, 50)
    # Additive truth plus a tiny product term: the 3-term family fits a little better.
    lines = _lines(lambda p, n: 50 + 4 * p + 2 * n + 0.002 * p * n, ps, ns, noise=0.02)
    data = parse_jsonlines(lines)[("<root>", "time")]
    choices = {"p": [(1.0, 0)], "n": [(1.0, 0)]}
    strict, strict_cv = combine(data, choices)
    lenient, lenient_cv = combine(data, choices, margin=0.5)
    assert len(strict.terms) == 3 and len(lenient.terms) == 2
    assert strict_cv < lenient_cv


def test_combination_may_drop_a_parameter_without_effect():
    from hpcpredict.daemon.lab.scaling.regression import combine, combine_for_noise

    ps, ns = (2, 4, 8, 16, 32), (10, 20, 30, 40, 50)
    # n has no effect and the noise is 80 %: without dropping, covering families force an
    # n term into every multi-parameter hypothesis.
    lines = _lines(lambda p, n: 100 + 30 * p, ps, ns, noise=0.8, seed=4)
    data = parse_jsonlines(lines)[("<root>", "time")]
    choices = {"p": [(1.0, 0)], "n": [(0.5, 0)]}
    forced, _ = combine(data, choices)
    assert any("n" in t.exponents for t in forced.terms)
    for noise in (0.1, 0.9):
        dropped, cv = combine_for_noise(data, choices, noise=noise)
        assert [dict(t.exponents) for t in dropped.terms] == [{"p": (1.0, 0)}]
        assert np.isfinite(cv)


def test_relative_fit_follows_the_small_values_under_relative_noise():
    from hpcpredict.daemon.lab.scaling.regression import (
        REGRESSION_RELATIVE_FIT_BELOW, loo_fit, combine, combine_for_noise)

    ps, ns = (2, 4, 8, 16, 32), (10, 20, 30, 40, 50)
    lines = _lines(lambda p, n: 5 + 0.5 * p * n, ps, ns, noise=0.2, seed=1)
    data = parse_jsonlines(lines)[("<root>", "time")]
    y = data.medians()
    design = np.column_stack([np.ones(25), data.coordinates().prod(axis=1)])[None]
    plain, plain_cv = loo_fit(design, y)
    weighted, weighted_cv = loo_fit(design, y, 1 / y)
    # weighted least squares = ordinary least squares on rows divided by y
    direct = np.linalg.lstsq(design[0] / y[:, None], np.ones(25), rcond=None)[0]
    assert weighted[0] == pytest.approx(direct, rel=1e-9)
    # relative errors: the weighted fit has the smaller mean relative residual
    rel = [np.mean(np.abs(design[0] @ c - y) / y) for c in (plain[0], weighted[0])]
    assert rel[1] < rel[0]
    # its leave-one-out SMAPE matches refitting without each point in turn
    held = []
    for i in range(25):
        keep = np.arange(25) != i
        c = np.linalg.lstsq(design[0][keep] / y[keep, None], np.ones(24), rcond=None)[0]
        f = design[0][i] @ c
        held.append(abs(y[i] - f) / ((abs(y[i]) + abs(f)) / 2))
    assert weighted_cv[0] == pytest.approx(100 * np.mean(held), rel=1e-6)
    choices = {"p": [(1.0, 0)], "n": [(1.0, 0)]}
    calm, _ = combine_for_noise(data, choices, noise=0.2)
    assert calm == combine(data, choices, relative=True, allow_dropping=True)[0]
    noisy, _ = combine_for_noise(data, choices, noise=REGRESSION_RELATIVE_FIT_BELOW + 0.1,
                                 relative_below=REGRESSION_RELATIVE_FIT_BELOW)
    assert noisy == combine(data, choices, allow_dropping=True)[0]
    assert calm != noisy


def test_one_parameter_combination_is_unchanged_by_the_noise_rule():
    from hpcpredict.daemon.lab.scaling.regression import combine, combine_for_noise

    lines = [json.dumps({"params": {"p": p}, "value": [3 + 0.2 * p ** 1.5 * (1 + 0.3 * ((p * 7) % 5 - 2) / 2)]})
             for p in (2, 4, 8, 16, 32, 64)]
    data = parse_jsonlines(lines)[("<root>", "time")]
    choices = {"p": [(1.5, 0), (1.0, 0)]}
    for noise in (0.01, 0.9):
        assert combine_for_noise(data, choices, noise) == combine(data, choices)


def test_regression_modeler_fits_noisy_combinations_by_plain_least_squares():
    # Round 4: between REGRESSION_RELATIVE_FIT_BELOW and RELATIVE_FIT_BELOW the regression
    # modeler combines by ordinary least squares (the adaptive modeler still relatively).
    from hpcpredict.daemon.lab.scaling.measurements import relative_deviation_range
    from hpcpredict.daemon.lab.scaling.regression import (
        REGRESSION_RELATIVE_FIT_BELOW, RELATIVE_FIT_BELOW, combine, combine_for_noise, fit_regression,
        parameter_line, rank_single_parameter)

    ps, ns = (2, 4, 8, 16, 32), (10, 20, 30, 40, 50)
    lines = _lines(lambda p, n: 5 + 0.5 * p * n, ps, ns, noise=0.5, seed=1)
    data = parse_jsonlines(lines)[("<root>", "time")]
    rrd = relative_deviation_range(data.points)
    assert REGRESSION_RELATIVE_FIT_BELOW < rrd <= RELATIVE_FIT_BELOW
    choices = {name: [rank_single_parameter(*parameter_line(data, k))[0].pair]
               for k, name in enumerate(data.parameters)}
    plain = combine(data, choices, allow_dropping=True)[0]
    relative = combine(data, choices, relative=True, allow_dropping=True)[0]
    assert plain != relative
    assert fit_regression(data).function == plain
    assert combine_for_noise(data, choices, rrd)[0] == relative      # adaptive modeler's rule
    assert combine_for_noise(data, choices, 0.95)[0] == relative     # relative at every noise level
