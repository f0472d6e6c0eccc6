"""PMNF building blocks and the Extra-P JSON Lines reader."""
import json

import numpy as np
import pytest

from hpcpredict.daemon.errors import ParseError
from hpcpredict.daemon.lab.scaling.measurements import (
    InsufficientMeasurements, MeasurementPoint, parse_jsonlines, relative_deviation_range)
from hpcpredict.daemon.lab.scaling.pmnf import CLASSES, EXPONENT_SET, CompoundTerm, PmnfFunction, smape


def test_exponent_set_matches_seed_001():
    # ({0..5/2} x {0,1,2}) U ({5/4,4/3,3} x {0,1}) U ({4/5,...} x {0}) = 43 pairs incl. (0, 0)
    assert len(CLASSES) == 43 and len(EXPONENT_SET) == 42
    assert (2.5, 2) in CLASSES and (3.0, 1) in CLASSES and (3.0, 2) not in CLASSES
    assert (0.8, 0) in CLASSES and (0.8, 1) not in CLASSES
    assert (0.0, 1) in CLASSES and (0.0, 0) in CLASSES


def test_function_evaluate_expression_round_trip():
    f = PmnfFunction(1.5, (CompoundTerm(2.0, {"p": (0.5, 0), "n": (1.0, 1)}),))
    value = f.evaluate({"p": 16.0, "n": 8.0})
    assert value == pytest.approx(1.5 + 2 * 4 * 8 * 3)
    assert "p^(1/2)" in f.expression() and "log2(n)^1" in f.expression()
    again = PmnfFunction.from_dict(json.loads(json.dumps(f.to_dict())))
    assert again == f
    assert f.lead_exponents() == {"p": (0.5, 0), "n": (1.0, 1)}


def test_smape_zero_for_equal_and_symmetric():
    assert smape(np.array([1.0, 2.0]), np.array([1.0, 2.0])) == 0.0
    assert smape(np.array([1.0]), np.array([3.0])) == pytest.approx(100.0)


def test_jsonlines_groups_repetitions_and_defaults():
    lines = [
        '{"params": {"p": 2, "n": 10}, "callpath": "main", "metric": "time", "value": [1.0, 3.0]}',
        '{"params": {"n": 10, "p": 2}, "callpath": "main", "metric": "time", "value": 2.0}',
        '',
        '{"params": {"p": 4, "n": 10}, "value": 5}',
    ]
    sets = parse_jsonlines(lines, source="t.jsonl")
    main = sets[("main", "time")]
    assert main.parameters == ("n", "p")
    assert main.points[0].values == (1.0, 3.0, 2.0) and main.points[0].median == 2.0
    assert sets[("<root>", "time")].points[0].coordinate == (10.0, 4.0)


@pytest.mark.parametrize("line, where", [
    ('{"params": {"p": 2}, "value": [1.0', "invalid JSON"),
    ('{"value": [1.0]}', "params"),
    ('{"params": {"p": 2}}', "missing 'value'"),
    ('{"params": {"p": 0}, "value": 1}', "> 0"),
    ('{"params": {"p": "x"}, "value": 1}', "number"),
    ('{"params": {"p": 2}, "value": ["a"]}', "number"),
    ('{"params": {"p": 2}, "value": []}', "empty"),
    ('[1, 2]', "object"),
])
def test_jsonlines_errors_name_the_line(line, where):
    with pytest.raises(ParseError) as error:
        parse_jsonlines(['{"params": {"p": 1}, "value": 1}', line], source="bad.jsonl")
    assert "bad.jsonl:2" in str(error.value) and where in str(error.value)


def test_jsonlines_parameter_mismatch_and_empty():
    with pytest.raises(ParseError, match="differ"):
        parse_jsonlines(['{"params": {"p": 1}, "value": 1}', '{"params": {"q": 1}, "value": 1}'])
    with pytest.raises(ParseError, match="no measurements"):
        parse_jsonlines(["", "  "])


def test_five_values_rule_has_a_clear_message():
    lines = [json.dumps({"params": {"p": p}, "value": [p]}) for p in (1, 2, 4, 8)]
    data = parse_jsonlines(lines)[("<root>", "time")]
    with pytest.raises(InsufficientMeasurements, match="4 distinct values .* at least 5"):
        data.check_enough_values("four.jsonl")


def test_rrd_is_range_of_relative_deviation():
    points = [MeasurementPoint((1.0,), (9.0, 11.0)), MeasurementPoint((2.0,), (19.0, 21.0, 20.0))]
    # rd: (-0.1, 0.1) and (-0.05, 0.05, 0) -> max - min = 0.2
    assert relative_deviation_range(points) == pytest.approx(0.2)
    assert relative_deviation_range([MeasurementPoint((1.0,), (5.0,))]) == 0.0


def test_summarised_replaces_repetitions_by_their_mean_or_median():
    from hpcpredict.daemon.lab.scaling.measurements import MeasurementSet

    points = (MeasurementPoint((1.0,), (1.0, 2.0, 9.0)), MeasurementPoint((2.0,), (4.0, 4.0, 7.0)))
    data = MeasurementSet("main", "time", ("p",), points)
    assert list(data.summarised("mean").medians()) == [4.0, 5.0]
    assert list(data.summarised("median").medians()) == [2.0, 4.0]
    with pytest.raises(ValueError, match="trimmed"):
        data.summarised("trimmed")


def test_location_variance_ratio_prefers_the_mean_only_for_light_tailed_noise():
    from hpcpredict.daemon.lab.scaling.measurements import location_variance_ratio

    rng = np.random.default_rng(5)

    def points(noise):
        return [MeasurementPoint((float(k),), tuple(100 * noise())) for k in range(1, 26)]
    uniform = location_variance_ratio(points(lambda: 1 + rng.uniform(-0.5, 0.5, 5)))
    # right-skewed timing noise with rare large interference spikes (one run in ten 3x slower)
    spiky = location_variance_ratio(points(lambda: (1 + 0.05 * rng.exponential(size=5))
                                           * np.where(rng.random(5) < 0.1, 3.0, 1.0)))
    assert 0.4 < uniform < 0.7            # uniform: Var(mean of 5) ~ 0.55 Var(median of 5)
    assert spiky > 1.0
    two = [MeasurementPoint((float(k),), (1.0, 3.0)) for k in range(1, 6)]
    assert location_variance_ratio(two) == 1.0      # median of two values is their mean
