"""Trained models of every family, published and served by the real daemon."""
from __future__ import annotations

import grpc
import pytest

from hpcpredict.daemon.registry import ModelRegistry
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from hpcpredict.proto.v1 import hpcpredict_pb2_grpc as pb_grpc


@pytest.fixture
def stubs(daemon):
    public = grpc.insecure_channel(f"unix:{daemon.socket}")
    admin = grpc.insecure_channel(f"unix:{daemon.socket}")   # root: a trusted tool on the gRPC socket
    yield pb_grpc.PredictorStub(public), pb_grpc.PredictorStub(admin)
    public.close()
    admin.close()


def _number(value: float) -> pb.Value:
    return pb.Value(number=value)


def test_runtime_model_answers_from_inputs_and_runtime_features(daemon, stubs, tmp_path):
    from hpcpredict.daemon.lab.runtime.dataset import parse_runs_csv
    from hpcpredict.daemon.lab.runtime.model import RuntimeModel
    from hpcpredict.daemon.lab.runtime.packing import save_application_model

    stub, admin = stubs
    csv = "n,ntasks,t\n" + "\n".join(f"{n},{p},{n / p:.3f}" for n in range(10, 400, 5) for p in (1, 2, 4, 8))
    model = RuntimeModel(params={"n_estimators": 30, "random_state": 0}).fit(parse_runs_csv(csv, target="t"))
    folder = tmp_path / "runtime"
    save_application_model(model, folder, application="solver", metadata={"version": "7"})
    published = ModelRegistry(daemon.data_dir / "models").publish("runtime", folder)
    reply = admin.ReloadModels(pb.ReloadRequest(), timeout=60)
    assert not reply.errors
    # the site's published model shadows the bundled example of the same kind
    assert [m.version for m in reply.models if m.kind == "runtime"] == [published.version]

    request = pb.JobRequest(job=pb.JobIdentity(user="dana", application="solver"),
                            resources=pb.Resources(nodes=1, ntasks=4), inputs={"n": _number(100.0)})
    estimate = stub.Predict(request, timeout=10)
    assert not estimate.fallback
    assert 18 < estimate.runtime_s < 32  # truth: 100 / 4 = 25 s
    assert estimate.interval.low_s <= estimate.runtime_s <= estimate.interval.high_s
    assert estimate.interval.coverage == pytest.approx(0.8)
    assert estimate.suggested_time_limit_s >= estimate.interval.high_s
    assert any("solver" in line for line in estimate.explanation)
    # the application reports a larger problem early in its run: the daemon re-predicts
    refined = stub.ReportRuntimeFeatures(pb.RuntimeFeatures(
        prediction_id=estimate.prediction_id,
        features=[pb.ReportedFeature(key="n", value=_number(300.0), at_s=2.0)]), timeout=10)
    assert refined.runtime_s > 2 * estimate.runtime_s  # truth: 75 s
    # without the input the model needs, the history path answers instead
    assert stub.Predict(pb.JobRequest(job=pb.JobIdentity(user="dana", application="solver")), timeout=10).fallback


def test_scaling_model_gives_node_count_advice(daemon, stubs, tmp_path):
    from hpcpredict.daemon.scaling.advice import ScalingModel, save_scaling_model

    stub, admin = stubs
    model = ScalingModel(application="lulesh", expression="10 + 640 * p^(-1)", parameters=("p",), constant=10.0,
                         terms=((640.0, (("p", -1.0, 0),)),), scaling_parameter="p", ranges={"p": (4.0, 64.0)})
    folder = tmp_path / "scaling"
    save_scaling_model(model, folder)
    ModelRegistry(daemon.data_dir / "models").publish("scaling", folder)
    assert not admin.ReloadModels(pb.ReloadRequest(), timeout=60).errors
    estimate = stub.Predict(pb.JobRequest(job=pb.JobIdentity(user="erin", application="lulesh"),
                                          resources=pb.Resources(nodes=4, ntasks=16, ntasks_per_node=4),
                                          time_limit_s=3600), timeout=10)
    rows = list(estimate.node_advice)
    assert len(rows) >= 3 and sum(r.recommended for r in rows) == 1
    by_nodes = {r.nodes: r for r in rows}
    assert by_nodes[4].runtime_s == pytest.approx(10 + 640 / 16)
    assert any("node-count advice" in line for line in estimate.explanation)


def test_bundled_example_models_answer_on_embedded_defaults(daemon, stubs):
    """A first-time user (no config, nothing published) gets the bundled example models."""
    from pathlib import Path

    from hpcpredict.daemon.cli.predict import build_request

    stub, admin = stubs
    kinds = {m.kind for m in admin.ListModels(pb.ListModelsRequest(), timeout=10).models}
    assert {"runtime", "scaling"} <= kinds
    examples = Path(__file__).resolve().parents[2] / "contrib" / "examples"
    lammps, _ = build_request((examples / "lammps-job.sh").read_bytes(), [], user="newcomer")
    estimate = stub.Predict(lammps, timeout=10)
    assert estimate.application == "lmp" and not estimate.fallback
    assert estimate.model_name.startswith("runtime-ann/lmp")   # the learner CV chose (contrib/bundled/build.sh)
    stencil, _ = build_request((examples / "stencil-job.sh").read_bytes(), [], user="newcomer")
    estimate = stub.Predict(stencil, timeout=10)
    assert estimate.application == "stencil"
    assert sum(row.recommended for row in estimate.node_advice) == 1


def test_comm_model_class_b_at_submission_and_class_c_at_allocation(daemon, stubs, tmp_path):
    """A SimGrid-trained (simulated fat tree) comm model served through Predict and PredictAtAllocation."""
    import shutil

    from hpcpredict.daemon.cli.main import main as cli

    stub, admin = stubs
    shape = "2;4,4;1,2;1,2"
    data, topology = tmp_path / "train.csv", tmp_path / "topology.json"
    assert cli(["comm", "simulate", "--fabric", "fattree", "--shape", shape, "--pattern", "benchmark",
                "--points", "24", "--seed", "5", "--max-ranks", "32", "--out", str(data),
                "--topology-out", str(topology)]) == 0
    model_dir = tmp_path / "comm"
    assert cli(["comm", "train", str(data), "--topology", str(topology), "--out", str(model_dir),
                "--tune-iter", "0"]) == 0
    registry = ModelRegistry(daemon.data_dir / "models")
    registry.publish("comm", model_dir)
    placement_dir = tmp_path / "placement"
    placement_dir.mkdir()
    shutil.copy(topology, placement_dir / "topology.json")
    registry.publish("topology", placement_dir)
    assert not admin.ReloadModels(pb.ReloadRequest(), timeout=60).errors

    job = pb.JobRequest(job=pb.JobIdentity(user="fay", application="halo"),
                        resources=pb.Resources(nodes=4, ntasks=8, ntasks_per_node=2),
                        comm=pb.CommPattern(name="halo3d", message_bytes=65536, phases=10))
    submitted = stub.Predict(job, timeout=30)
    assert submitted.HasField("comm_time_s") and submitted.comm_time_s > 0
    assert submitted.feature_class == "B"
    allocated = stub.PredictAtAllocation(pb.AllocationRequest(
        node_list="node-[0-1,8,12]", job_id="42", prediction_id=submitted.prediction_id), timeout=30)
    assert allocated.feature_class == "C" and allocated.comm_time_s > 0
    assert any("class C" in line for line in allocated.explanation)
    # nodes the placement does not know: the answer falls back to class B and says why
    unknown = stub.PredictAtAllocation(pb.AllocationRequest(request=job, node_list="other[1-4]", job_id="43"),
                                       timeout=30)
    assert unknown.feature_class == "B"
    assert any("class C features unavailable" in line for line in unknown.explanation)
