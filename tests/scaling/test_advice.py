"""Node-count advice contract: ScalingModel JSON, loading, policies, table."""
import json
import math

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
