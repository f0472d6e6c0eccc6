"""Node-count advice contract: ScalingModel JSON, loading, policies, table."""
import json
import math
from dataclasses import replace as dataclass_replace

import pytest

from hpcpredict.daemon.errors import InvalidRequest, ModelArtifactError
from hpcpredict.daemon.scaling.advice import (
    NodeAdviceRow, ScalingModel, format_advice_table, load_scaling_models, node_advice, save_scaling_model)


def amdahl(application="app", ranges=None):
    # 20 s serial + 1280 s / p parallel + 2 s * log2 p communication
    return ScalingModel(application=application, expression="20 + 1280 * p^(-1) + 2 * log2(p)^1",
                        parameters=("p",), constant=20.0,
                        terms=((1280.0, (("p", -1.0, 0),)), (2.0, (("p", 0.0, 1),))),
                        ranges=ranges or {"p": (1.0, 64.0)})


def test_predict_and_json_round_trip(tmp_path):
    model = amdahl()
    assert model.predict({"p": 16}) == pytest.approx(20 + 80 + 8)
    again = ScalingModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert again == model
    path = save_scaling_model(model, tmp_path)
    assert load_scaling_models(tmp_path) == {"app": model}
    assert path.name == "app.json"


def test_multi_parameter_model_needs_other_params():
    model = ScalingModel(application="x", expression="", parameters=("n", "p"), constant=1.0,
                         terms=((1e-3, (("n", 2.0, 0), ("p", -1.0, 0))),), ranges={"p": (1, 16), "n": (10, 100)})
    rows = node_advice(model, requested_nodes=2, ntasks_per_node=2, other_params={"n": 1000},
                       requested_time_s=100)
    by_nodes = {r.nodes: r for r in rows}
    assert by_nodes[2].runtime_s == pytest.approx(1 + 1e-3 * 1e6 / 4)
    with pytest.raises(InvalidRequest, match="'n'"):
        node_advice(model, requested_nodes=2, ntasks_per_node=2, other_params={}, requested_time_s=100)


def test_least_node_hours_within_tolerance_of_fastest():
    rows = node_advice(amdahl(), requested_nodes=4, ntasks_per_node=1, other_params={},
                       requested_time_s=3600)
    assert sum(r.recommended for r in rows) == 1
    fastest = min(r.runtime_s for r in rows)
    chosen = next(r for r in rows if r.recommended)
    assert chosen.runtime_s <= 1.1 * fastest
    eligible = [r for r in rows if r.runtime_s <= 1.1 * fastest]
    assert chosen.node_hours == min(r.node_hours for r in eligible)
    # candidates: powers of two around 4, inside the measured range * 4
    assert [r.nodes for r in rows] == [1, 2, 4, 8, 16, 32]
    assert rows[0].efficiency == pytest.approx(1.0)
    assert all(r.node_hours == pytest.approx(r.nodes * r.runtime_s / 3600) for r in rows)


def test_meets_request_picks_smallest_count_in_time_or_fastest():
    model = amdahl()
    rows = node_advice(model, requested_nodes=4, ntasks_per_node=1, other_params={},
                       requested_time_s=200, policy="meets-request")
    chosen = next(r for r in rows if r.recommended)
    assert chosen.runtime_s <= 200 and all(r.runtime_s > 200 for r in rows if r.nodes < chosen.nodes)
    rows = node_advice(model, requested_nodes=4, ntasks_per_node=1, other_params={},
                       requested_time_s=1, policy="meets-request")
    chosen = next(r for r in rows if r.recommended)
    assert chosen.runtime_s == min(r.runtime_s for r in rows)


def test_extrapolation_range_limits_candidates_but_keeps_request():
    model = amdahl(ranges={"p": (8.0, 32.0)})   # sane: 8 .. 128 processes
    rows = node_advice(model, requested_nodes=1, ntasks_per_node=16, other_params={}, requested_time_s=60)
    assert [r.nodes for r in rows] == [1, 2, 4, 8]


def test_explicit_candidates_and_nonpositive_predictions_dropped():
    model = ScalingModel(application="neg", expression="100 - 10 p", parameters=("p",), constant=100.0,
                         terms=((-10.0, (("p", 1.0, 0),)),), ranges={"p": (1, 8)})
    rows = node_advice(model, requested_nodes=2, ntasks_per_node=1, other_params={},
                       requested_time_s=60, candidates=[1, 2, 16])
    assert [r.nodes for r in rows] == [1, 2]
    with pytest.raises(InvalidRequest, match="no positive runtime"):
        node_advice(model, requested_nodes=16, ntasks_per_node=1, other_params={},
                    requested_time_s=60, candidates=[16, 32])


@pytest.mark.parametrize("kwargs, field", [
    ({"requested_nodes": 0}, "requested_nodes"),
    ({"ntasks_per_node": 0}, "ntasks_per_node"),
    ({"policy": "cheapest"}, "policy"),
    ({"tolerance": -0.1}, "tolerance"),
    ({"policy": "meets-request", "requested_time_s": 0}, "requested_time_s"),
])
def test_bad_requests_name_the_field(kwargs, field):
    args = dict(requested_nodes=2, ntasks_per_node=1, other_params={}, requested_time_s=60)
    args.update(kwargs)
    with pytest.raises(InvalidRequest) as error:
        node_advice(amdahl(), **args)
    assert error.value.field == field


def test_bad_model_files_name_the_file(tmp_path):
    good = amdahl("good").to_dict()
    (tmp_path / "good.json").write_text(json.dumps(good))
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(ModelArtifactError, match="broken.json"):
        load_scaling_models(tmp_path)
    (tmp_path / "broken.json").write_text(json.dumps(dict(good, application="b", constant="nan")))
    with pytest.raises(ModelArtifactError, match="broken.json"):
        load_scaling_models(tmp_path)
    (tmp_path / "broken.json").write_text(json.dumps(dict(good, scaling_parameter="nodes")))
    with pytest.raises(ModelArtifactError, match="scaling parameter"):
        load_scaling_models(tmp_path)
    (tmp_path / "broken.json").write_text(json.dumps(dict(good)))   # same application twice
    with pytest.raises(ModelArtifactError, match="second"):
        load_scaling_models(tmp_path)
    with pytest.raises(ModelArtifactError, match="does not exist"):
        load_scaling_models(tmp_path / "missing")


def test_format_table_marks_recommendation():
    rows = [NodeAdviceRow(1, 3725.0, 1.03, 1.0, False), NodeAdviceRow(2, 1900.0, 1.06, 0.98, True)]
    lines = format_advice_table(rows)
    assert lines[0].split() == ["nodes", "runtime", "node-h", "eff"]
    assert lines[1].split() == ["1", "1:02:05", "1.03", "100%"]
    assert lines[2].endswith("*") and not lines[1].endswith("*")
    assert all(len(line) < 40 for line in lines)
    assert not math.isnan(rows[1].efficiency)


def _dip_data(repetitions=10):
    """Runtimes with a dip at p = 2 that a one-term PMNF model smooths away (the shape of a
    CPU-bound code on the 2-core reference machine: faster on 2 cores, oversubscribed beyond)."""
    from hpcpredict.daemon.lab.scaling.measurements import parse_jsonlines

    truth = {1: 0.86, 2: 0.67, 3: 0.75, 4: 0.79, 5: 0.86, 6: 0.90, 8: 1.02}
    jitter = [(-1) ** k * 0.01 * (k % 3) for k in range(repetitions)]   # about 1 %, symmetric
    lines = [json.dumps({"params": {"p": p}, "callpath": "cpu", "metric": "time", "value": [t * (1 + j) for j in jitter]})
             for p, t in truth.items()]
    return truth, parse_jsonlines(lines)[("cpu", "time")]


def test_measured_median_replaces_a_model_that_misses_it_beyond_the_noise():
    from hpcpredict.daemon.lab.scaling.fitting import fit_all, scaling_model

    truth, data = _dip_data()
    fit = fit_all({("cpu", "time"): data}, modeler="regression")[("cpu", "time")]
    model = scaling_model(fit, data, application="cpu")
    assert len(model.measured) == len(truth)
    assert all(se < 0.01 * median for _, median, se in model.measured)   # ~1 % noise, 10 repetitions
    rows = node_advice(model, requested_nodes=1, ntasks_per_node=1, other_params={}, requested_time_s=1.0,
                       candidates=sorted(truth))
    by_nodes = {r.nodes: r for r in rows}
    assert model.predict({"p": 2.0}) > 1.05 * truth[2]        # the model alone misses the dip ...
    assert by_nodes[2].measured and by_nodes[2].runtime_s == pytest.approx(truth[2], rel=0.02)
    assert next(r.nodes for r in rows if r.recommended) == 2  # ... and the advice does not
    assert any(line.endswith("(measured)") for line in format_advice_table(rows))
    model_only = node_advice(dataclass_replace(model, measured=()), requested_nodes=1, ntasks_per_node=1,
                             other_params={}, requested_time_s=1.0, candidates=sorted(truth))
    assert next(r.nodes for r in model_only if r.recommended) == 1
    assert not any(r.measured for r in model_only)


def test_measured_median_is_not_used_where_the_model_fits_or_without_repetitions():
    model = amdahl()
    at_16 = model.predict({"p": 16.0})
    within_noise = dataclass_replace(model, measured=(((16.0,), at_16 * 1.03, 0.05 * at_16),))
    assert model.measured == () and within_noise.measured_runtime({"p": 16.0}, at_16) is None
    below_floor = dataclass_replace(model, measured=(((16.0,), at_16 * 1.015, 0.0),))
    assert below_floor.measured_runtime({"p": 16.0}, at_16) is None   # 1.5 %: timing jitter
    missed = dataclass_replace(model, measured=(((16.0,), at_16 * 1.3, 0.01 * at_16),))
    assert missed.measured_runtime({"p": 16.0}, at_16) == pytest.approx(at_16 * 1.3)
    assert missed.measured_runtime({"p": 32.0}, model.predict({"p": 32.0})) is None   # not measured there
    from hpcpredict.daemon.lab.scaling.fitting import measured_points
    from hpcpredict.daemon.lab.scaling.measurements import parse_jsonlines

    lines = [json.dumps({"params": {"p": p}, "value": values}) for p, values in
             ((1, [2.0, 2.1]), (2, [1.0, 1.1, 1.2]), (4, [0.5]), (8, [0.4, 0.5, 0.45, 0.41]), (16, [0.3, 0.31, 0.32]))]
    points = measured_points(parse_jsonlines(lines)[("<root>", "time")])
    assert [point for point, _, _ in points] == [(2.0,), (8.0,), (16.0,)]   # >= 3 repetitions only


def test_measured_points_survive_json_and_bad_ones_are_refused(tmp_path):
    model = dataclass_replace(amdahl(), measured=(((4.0,), 350.0, 3.5), ((8.0,), 190.0, 2.0)))
    again = ScalingModel.from_dict(json.loads(json.dumps(model.to_dict())))
    assert again == model
    older = model.to_dict()
    del older["measured"]                    # a model saved before measured points were kept
    assert ScalingModel.from_dict(older).measured == ()
    for bad in ({"params": {"p": 4}, "median": -1.0, "se": 0.1}, {"params": {"q": 4}, "median": 1.0, "se": 0.1},
                {"params": {"p": 4}, "median": 1.0, "se": float("nan")}):
        data = dict(model.to_dict(), measured=[bad])
        (tmp_path / "app.json").write_text(json.dumps(data))
        with pytest.raises(ModelArtifactError, match="bad scaling model"):
            load_scaling_models(tmp_path)
