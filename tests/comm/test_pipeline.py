"""End to end with the real parts: a real mpirun of contrib/commbench, a tiny SimGrid run,
training, evaluation and the daemon-side CommModelSet."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcpredict.daemon.cli.main import main as cli
from hpcpredict.daemon.comm.records import read_records
from hpcpredict.daemon.comm.served import CommModelSet, CommRequest
from hpcpredict.daemon.errors import InvalidRequest, ModelArtifactError, UnknownNode
from hpcpredict.topology.placement import Placement

REPO = Path(__file__).resolve().parents[2]
SHAPE = "2;4,4;1,2;1,2"            # 16-node two-level fat tree


@pytest.fixture(scope="module")
def mpi_records(tmp_path_factory):
    """A real (small) commbench sweep under Open MPI's mpirun on this machine."""
    tmp = tmp_path_factory.mktemp("mpi")
    raw = tmp / "raw.jsonl"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    cmd = [shutil.which("mpirun") or "mpirun", "-n", "4", sys.executable,
           str(REPO / "contrib/commbench/commbench.py"), "--nodes", "1", "--ppn", "2,4",
           "--sizes", "16,4096,262144", "--peers", "1,2", "--repeats", "1", "--iterations", "5",
           "--out", str(raw)]
    subprocess.run(cmd, check=True, env=env, timeout=120, capture_output=True)
    (tmp / "raw_points.json").write_text(json.dumps([json.loads(line) for line in raw.read_text().splitlines()]))
    out = tmp / "mpi.csv"
    assert cli(["comm", "bench-ingest", str(raw), "--out", str(out)]) == 0
    return out


def test_real_mpi_benchmark_records(mpi_records):
    recs = read_records(mpi_records)
    assert len(recs) == 2 * 2 * 3
    assert {r.ntasks for r in recs} == {2, 4} and {r.source for r in recs} == {"mpi"}
    assert all(r.time_s > 0 for r in recs)
    assert {(r.ntasks, r.peers, r.message_bytes) for r in recs} == {
        (n, pm, size) for n in (2, 4) for pm in (1, 2) for size in (16, 4096, 262144)}
    # Every point moved its bytes: each receiver found all of them, from the right peer. (Not a
    # comparison of times: which size ran faster is a benchmark's question, and with 4 ranks on
    # 2 cores a preempted 16 B point can outlast a 256 KiB one.)
    raw = json.loads((mpi_records.parent / "raw_points.json").read_text())
    assert len(raw) == len(recs) and all(point["delivered"] is True for point in raw)


def test_real_mpi_records_train_and_predict(mpi_records, tmp_path, capsys):
    model_dir = tmp_path / "model"
    assert cli(["comm", "train", str(mpi_records), "--out", str(model_dir), "--tune-iter", "0"]) == 0
    models = CommModelSet.load(model_dir)
    assert set(models.models) == {"A", "B"} and "C" not in models.models
    req = CommRequest(pattern="benchmark", message_bytes=4096, ntasks=4, nodes=1, ntasks_per_node=4, peers=2)
    pred = models.predict(req)
    assert pred.feature_class == "B" and 0 < pred.seconds < 1
    capsys.readouterr()
    assert cli(["comm", "evaluate", "--model", str(model_dir), "--data", str(mpi_records), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"classA", "classB", "alpha-beta"}
    assert result["classB"]["all"]["n"] == 12 and 0 <= result["classB"]["all"]["rcc"] <= 1


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sim")
    data, topo = tmp / "train.csv", tmp / "topology.json"
    assert cli(["comm", "simulate", "--fabric", "fattree", "--shape", SHAPE, "--pattern", "benchmark",
                "--points", "24", "--seed", "5", "--max-ranks", "32", "--out", str(data),
                "--topology-out", str(topo)]) == 0
    assert cli(["comm", "simulate", "--fabric", "fattree", "--shape", SHAPE, "--pattern", "halo3d",
                "--points", "4", "--seed", "6", "--max-ranks", "32", "--background", "2",
                "--out", str(tmp / "test.csv")]) == 0
    return tmp


def test_simulated_records_and_topology(simulated):
    placement = Placement.load(simulated / "topology.json")
    assert placement.kind == "infiniband" and len(placement) == 16
    assert placement.path("node-5") == ("s1", "r0")            # leaf = id // 4; one pod
    recs = read_records(simulated / "train.csv")
    assert len(recs) == 24 and all(r.source == "simgrid" and r.time_s > 0 for r in recs)
    for r in recs:
        assert all(n in placement for n in r.node_list())
    # same configuration on two allocations: identical messages, times from the same simulator
    assert (recs[0].ntasks, recs[0].message_bytes) == (recs[1].ntasks, recs[1].message_bytes)
    test = read_records(simulated / "test.csv")
    assert {r.background for r in test} == {2} and {r.iterations for r in test} == {5}


def test_simulated_time_grows_with_message_size(tmp_path):
    from hpcpredict.daemon.lab.comm.simulate import simulate

    base = {"pattern": "halo3d", "ntasks": 8, "seed": 0, "grid": [], "peers": 0,
            "tasks_per_node": "2(x4)", "rank_node": [0, 0, 1, 1, 2, 2, 3, 3], "hosts": [0, 1, 4, 9]}
    points = [dict(base, message_bytes=size) for size in (64, 65536, 4 << 20)]
    times = [r.time_s for r in simulate("fattree", SHAPE, points)]
    assert times[0] < times[1] < times[2]
    assert 1e-7 < times[0] < 1e-4                              # a 64 B halo: microseconds


def test_simulated_pipeline_class_c(simulated, tmp_path, capsys):
    model_dir = tmp_path / "model"
    topo = str(simulated / "topology.json")
    assert cli(["comm", "train", str(simulated / "train.csv"), "--topology", topo,
                "--out", str(model_dir), "--tune-iter", "0"]) == 0
    models = CommModelSet.load(model_dir)
    assert 15 <= len(models.manifest["classes"]["C"]["features"]) <= 40
    placement = Placement.load(topo)
    req = CommRequest(pattern="halo3d", message_bytes=65536, ntasks=8, nodes=4, ntasks_per_node=2)
    nodes = ["node-0", "node-1", "node-8", "node-12"]
    pred = models.predict(req, node_list=nodes, placement=placement)
    assert pred.feature_class == "C" and pred.seconds > 0 and pred.model_name == "gbrt-classC"
    assert models.predict(req).feature_class == "B"
    with pytest.raises(UnknownNode):
        models.predict(req, node_list=["node-0", "node-1", "node-8", "other"], placement=placement)
    with pytest.raises(InvalidRequest, match="pattern"):
        models.predict(CommRequest(pattern="ring", message_bytes=1, ntasks=8, nodes=4, ntasks_per_node=0))
    with pytest.raises(InvalidRequest, match="nodes"):
        models.predict(req, node_list=nodes[:3], placement=placement)
    capsys.readouterr()
    assert cli(["comm", "evaluate", "--model", str(model_dir), "--data", str(simulated / "test.csv"),
                "--topology", topo, "--json", "--plots", str(tmp_path / "sc")]) == 0
    result = json.loads(capsys.readouterr().out)
    assert list(result) == ["classA", "classB", "classC", "alpha-beta", "alpha-beta-gamma", "single-variable"]
    assert result["classC"]["halo3d"]["n"] == 4
    assert (tmp_path / "sc-classC.png").stat().st_size > 1000


def test_model_artifacts_are_checked(simulated, tmp_path):
    with pytest.raises(ModelArtifactError, match="manifest"):
        CommModelSet.load(tmp_path)
    model_dir = tmp_path / "m"
    assert cli(["comm", "train", str(simulated / "train.csv"), "--out", str(model_dir), "--tune-iter", "0"]) == 0
    (model_dir / "classA.skops").write_bytes(b"not a zip")
    with pytest.raises(ModelArtifactError, match="classA.skops"):
        CommModelSet.load(model_dir)


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert cli(["comm", "simulate", "--fabric", "fattree", "--shape", "2;4;1", "--pattern", "halo3d",
                "--points", "2", "--out", str(tmp_path / "x.csv")]) == 1
    assert "shape" in capsys.readouterr().err
    assert cli(["comm", "train", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "m")]) == 1
    assert "cannot read records" in capsys.readouterr().err
