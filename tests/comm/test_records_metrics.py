"""Records CSV, commbench ingestion, metrics and baselines on hand-made data."""
import numpy as np
import pytest

from hpcpredict.daemon.comm.records import CommRecord, read_records, record_messages, write_records
from hpcpredict.daemon.lab.comm.accuracy import mmre, pred25, rcc, scores
from hpcpredict.daemon.lab.comm.baselines import AlphaBeta, AlphaBetaGamma, SingleVariable
from hpcpredict.daemon.lab.comm.commbench_ingest import ingest_lines
from hpcpredict.daemon.lab.comm.simulate import plan_points, tasks_per_node_string
from hpcpredict.daemon.errors import ParseError


def test_records_round_trip(tmp_path):
    recs = [CommRecord(pattern="benchmark", ntasks=4, message_bytes=16, nodes="n[3,10]", time_s=2e-6,
                       peers=2, seed=9, tasks_per_node="2(x2)", source="simgrid", fabric="fattree",
                       shape="2;4,4;1,2;1,2", background=3, iterations=5),
            CommRecord(pattern="halo3d", ntasks=3, message_bytes=8, nodes="a,b", time_s=1e-5,
                       grid="3x1x1", rank_node_list="0 1 1")]
    path = tmp_path / "r.csv"
    write_records(path, recs)
    back = read_records(path)
    assert back == recs
    assert back[0].node_list() == ["n3", "n10"]
    assert back[0].rank_nodes().tolist() == [0, 0, 1, 1]
    assert back[1].rank_nodes().tolist() == [0, 1, 1]
    assert len(record_messages(back[0])) == 8


def test_read_records_errors_name_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("pattern,ntasks,message_bytes,nodes,time_s\nhalo3d,4,16,n1,1e-5\nhalo3d,x,16,n1,1e-5\n")
    with pytest.raises(ParseError, match=r"bad.csv:3.*ntasks"):
        read_records(path)
    path.write_text("pattern,ntasks\nhalo3d,4\n")
    with pytest.raises(ParseError, match="missing columns"):
        read_records(path)
    path.write_text("pattern,ntasks,message_bytes,nodes,time_s\nhalo3d,4,16,n1,0\n")
    with pytest.raises(ParseError, match="time_s must be > 0"):
        read_records(path)


def test_ingest_maps_ranks_to_sorted_node_order():
    line = ('{"pattern": "benchmark", "ntasks": 3, "message_bytes": 64, "peers": 1, "seed": 1, '
            '"nodes": ["n10", "n2"], "rank_nodes": [0, 0, 1], "time_s": 1e-5}')
    (r,) = ingest_lines([line])
    assert r.node_list() == ["n2", "n10"]
    assert r.rank_nodes().tolist() == [1, 1, 0]
    with pytest.raises(ParseError, match=":1: missing keys"):
        ingest_lines(['{"pattern": "benchmark"}'])
    with pytest.raises(ParseError, match="not JSON"):
        ingest_lines(["{oops"])


def test_ingest_rejects_a_point_whose_messages_did_not_arrive():
    line = ('{"pattern": "benchmark", "ntasks": 2, "message_bytes": 64, "peers": 1, "seed": 1, '
            '"nodes": ["n1"], "rank_nodes": [0, 0], "time_s": 1e-5, "delivered": %s}')
    assert len(ingest_lines([line % "true"])) == 1
    with pytest.raises(ParseError, match=r":1: bad benchmark record: .*did not arrive intact"):
        ingest_lines([line % "false"])


def test_metrics_hand_computed():
    t = np.array([1.0, 2.0, 3.0, 4.0])
    p = np.array([1.0, 3.0, 2.0, 5.0])
    assert mmre(t, p) == pytest.approx((0 + 0.5 + 1 / 3 + 0.25) / 4)
    assert pred25(t, p) == 0.5
    assert rcc(t, p) == pytest.approx(5 / 6)                    # only pair (2, 3) is discordant
    assert scores(t, t)["rcc"] == 1.0 and scores(t, t)["n"] == 4


def test_alpha_beta_gamma_recover_parameters():
    names = ("PM", "PD", "ppn", "NM_max", "hops_max", "SD_max")
    rng = np.random.default_rng(0)
    pm = rng.integers(1, 5, 50).astype(float)
    X = np.column_stack([pm, pm * rng.integers(16, 1 << 20, 50), rng.integers(1, 9, 50),
                         pm * rng.integers(1, 4, 50), rng.integers(0, 20, 50), rng.integers(1, 1e6, 50)])
    a, b, g = 1e-6, 1e-10, 2e-7
    y = AlphaBetaGamma._design(X, names) @ np.array([a, b, g])
    model = AlphaBetaGamma().fit(X, names, y)
    assert (model.alpha_, model.beta_, model.gamma_) == pytest.approx((a, b, g), rel=1e-6)
    ab = AlphaBeta().fit(X, names, 3e-6 * X[:, 0] + 2e-10 * X[:, 1])
    assert (ab.alpha_, ab.beta_) == pytest.approx((3e-6, 2e-10), rel=1e-6)
    assert AlphaBetaGamma.from_dict(model.to_dict()).predict(X, names) == pytest.approx(y)


def test_single_variable_finds_a_log_law():
    names = ("SD_max",)
    x = np.geomspace(10, 1e8, 60)
    y = 1e-6 + 2e-7 * np.log2(x + 1) ** 2
    model = SingleVariable("SD_max").fit(x[:, None], names, y)
    assert mmre(y, model.predict(x[:, None], names)) < 0.01
    again = SingleVariable.from_dict(model.to_dict())
    assert again.predict(x[:, None], names) == pytest.approx(model.predict(x[:, None], names))


def test_plan_points_shapes_and_fresh_allocations():
    pts = plan_points("dragonfly", "2,1;2,1;2,1;2", "lulesh1", 6, seed=3, max_ranks=64)
    assert len(pts) == 6
    for p in pts:
        assert p["ntasks"] in (8, 27, 64)
        assert len(p["hosts"]) == len(set(p["hosts"])) == max(p["rank_node"]) + 1
        assert max(p["hosts"]) < 16
    assert pts[0]["ntasks"] == pts[1]["ntasks"]                  # one configuration, two allocations
    assert tasks_per_node_string([4, 4, 4, 3]) == "4(x3),3"


def test_plan_points_peer_range_and_minimum_two_nodes():
    pts = plan_points("fattree", "2;4,4;1,2;1,2", "benchmark", 20, seed=4, max_ranks=32, peers=(5, 9))
    assert all(5 <= p["peers"] <= 9 for p in pts)
    assert all(max(p["rank_node"]) + 1 >= 2 for p in pts)
    halo = plan_points("fattree", "2;4,4;1,2;1,2", "halo3d", 20, seed=4, max_ranks=32)
    assert all(len(p["hosts"]) >= 2 for p in halo)             # never a network-free single node
