import json

import numpy as np
import pytest

from hpcpredict.daemon.errors import ModelArtifactError
from hpcpredict.daemon.lab.runtime.dataset import parse_runs_csv
from hpcpredict.daemon.lab.runtime.model import RuntimeModel
from hpcpredict.daemon.lab.runtime.packing import save_application_model
from hpcpredict.daemon.runtime.served import ApplicationModels, RuntimeEstimate

PARAMS = {"n_estimators": 25, "random_state": 0}


def _table(with_feature: bool):
    rng = np.random.default_rng(0)
    lines = ["n,ntasks,iters,iters@t,t"]
    for _ in range(80):
        n, p, iters = rng.integers(10, 100), rng.choice([1, 2, 4]), rng.integers(10, 50)
        runtime = n * iters / p / 50 * np.exp(rng.normal(0, 0.02))
        lines.append(f"{n},{p},{iters},0.1,{runtime:.5f}")
    table = parse_runs_csv("\n".join(lines), target="t")
    return table


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    table = _table(True)
    static = RuntimeModel("extra-trees", PARAMS, inputs=["n", "ntasks"]).fit(table)
    dynamic = RuntimeModel("extra-trees", PARAMS, inputs=["n", "ntasks", "iters"]).fit(table)
    save_application_model(static, root, application="solver", metadata={"variant": "inputs", "version": "7"})
    save_application_model(dynamic, root, application="solver", metadata={"variant": "runtime"})
    save_application_model(static, root, application="other", metadata={"input_aliases": {"n": "nodes"}})
    return root, table, static, dynamic


def test_round_trip_equals_in_memory_model(site):
    root, table, static, dynamic = site
    models = ApplicationModels.load(root)
    assert models.applications() == ["other", "solver"]
    for row in table.rows[:10]:
        estimate = models.estimate("solver", {"n": row["n"]}, nodes=1, ntasks=int(row["ntasks"]), cpus_per_task=1)
        expected = static.predict([{"n": row["n"], "ntasks": row["ntasks"]}])[0]
        low, high = static.predict_interval([{"n": row["n"], "ntasks": row["ntasks"]}], 0.8)
        assert isinstance(estimate, RuntimeEstimate)
        assert estimate.runtime_s == pytest.approx(expected, rel=1e-9)
        assert (estimate.low_s, estimate.high_s) == (pytest.approx(low[0]), pytest.approx(high[0]))
        assert estimate.model_version == "7" and estimate.coverage == 0.8


def test_runtime_features_select_the_richer_variant(site):
    root, table, static, dynamic = site
    models = ApplicationModels.load(root)
    row = table.rows[3]
    before = models.estimate("solver", {"n": row["n"]}, nodes=1, ntasks=int(row["ntasks"]), cpus_per_task=1)
    after = models.estimate("solver", {"n": row["n"], "iters": row["iters"]}, nodes=1,
                            ntasks=int(row["ntasks"]), cpus_per_task=1)
    assert before.model_name.endswith("/inputs") and after.model_name.endswith("/runtime")
    assert after.runtime_s == pytest.approx(dynamic.predict([row])[0])
    assert abs(after.runtime_s - table.y[3]) < abs(before.runtime_s - table.y[3]) or \
        abs(after.runtime_s - table.y[3]) / table.y[3] < 0.1


def test_missing_inputs_and_unknown_application_give_none(site):
    models = ApplicationModels.load(site[0])
    assert models.estimate("solver", {}, nodes=1, ntasks=2, cpus_per_task=1) is None
    assert models.estimate("solver", {"n": "big"}, nodes=1, ntasks=2, cpus_per_task=1) is None
    assert models.estimate("nosuch", {"n": 5.0}, nodes=1, ntasks=2, cpus_per_task=1) is None
    # aliases: model input "n" is served from the request's node count
    assert models.estimate("other", {}, nodes=50, ntasks=2, cpus_per_task=1) is not None


def _copy(site, tmp_path):
    import shutil
    target = tmp_path / "models"
    shutil.copytree(site[0], target)
    return target


@pytest.mark.parametrize("damage, message", [
    (lambda d: (d / "solver" / "inputs.npz").write_bytes(b"PK\x03\x04garbage"), "checksum"),
    (lambda d: (d / "solver" / "inputs.json").write_text("{not json"), "cannot read"),
    (lambda d: (d / "solver" / "inputs.npz").unlink(), "cannot read"),
    (lambda d: (d / "solver" / "inputs.json").write_text(json.dumps({"format": "pickle"})), "not a runtime model"),
])
def test_corrupt_artifacts_raise_model_artifact_error(site, tmp_path, damage, message):
    root = _copy(site, tmp_path)
    damage(root)
    with pytest.raises(ModelArtifactError, match=message):
        ApplicationModels.load(root)


def test_object_arrays_are_refused_without_unpickling(site, tmp_path):
    import hashlib
    import io
    root = _copy(site, tmp_path)
    description = json.loads((root / "solver" / "inputs.json").read_text())
    buffer = io.BytesIO()
    np.savez(buffer, left=np.array([object()], dtype=object))
    blob = buffer.getvalue()
    (root / "solver" / "inputs.npz").write_bytes(blob)
    description["arrays_sha256"] = hashlib.sha256(blob).hexdigest()
    (root / "solver" / "inputs.json").write_text(json.dumps(description))
    with pytest.raises(ModelArtifactError, match="corrupt"):
        ApplicationModels.load(root)


def test_save_rejects_bad_names_and_other_learners(tmp_path):
    table = _table(False)
    model = RuntimeModel("extra-trees", PARAMS, inputs=["n"]).fit(table)
    with pytest.raises(ModelArtifactError):
        save_application_model(model, tmp_path, application="../evil", metadata={})
    linear = RuntimeModel("linear", {}, inputs=["n"]).fit(table)
    with pytest.raises(ModelArtifactError):
        save_application_model(linear, tmp_path, application="x", metadata={})
    assert not any(tmp_path.rglob("*.pkl"))


def test_bad_coverage_is_an_invalid_request(site):
    from hpcpredict.daemon.errors import InvalidRequest
    models = ApplicationModels.load(site[0])
    with pytest.raises(InvalidRequest, match="coverage"):
        models.estimate("solver", {"n": 5.0}, nodes=1, ntasks=1, cpus_per_task=1, coverage=1.5)
    wide = models.estimate("solver", {"n": 50.0}, nodes=1, ntasks=2, cpus_per_task=1, coverage=0.95)
    narrow = models.estimate("solver", {"n": 50.0}, nodes=1, ntasks=2, cpus_per_task=1, coverage=0.5)
    assert wide.low_s <= narrow.low_s <= narrow.high_s <= wide.high_s


def test_the_bound_is_calibrated_only_where_a_held_out_run_ranks_it(site):
    """Bound mode sets a kill limit only from a calibrated bound: the conformal rank
    ⌈(n + 1)·c⌉ must be one of the n held-out scores (here the 80 training runs')."""
    models = ApplicationModels.load(site[0])

    def at(bound_coverage):
        return models.estimate("solver", {"n": 50.0}, nodes=1, ntasks=2, cpus_per_task=1,
                               bound_coverage=bound_coverage)
    assert at(None).bound_calibrated is False          # no bound asked
    assert at(0.97).bound_calibrated is True           # rank 79 of 80: the daemon's 1 - risk at 3 %
    assert at(0.99).bound_calibrated is False          # rank 81 of 80: the largest score, no promise
