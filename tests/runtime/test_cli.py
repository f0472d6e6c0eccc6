import json
from pathlib import Path


from hpcpredict.daemon.cli.main import main

DATA = Path(__file__).parent.parent / "data" / "runtime"


def test_evaluate_runtime_json_on_real_lammps_runs(capsys):
    code = main(["evaluate", "runtime", str(DATA / "lammps_melt.csv"), "--target", "runtime_s",
                 "--train-fraction", "0.3", "--seed", "1", "--learner", "extra-trees", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    for key in ("mape", "rank_accuracy", "coverage80", "coverage95", "interval_width80", "n_train", "n_test",
                "features_kept"):
        assert key in result
    assert 0 <= result["mape"] < 0.5 and result["rank_accuracy"] > 0.8
    assert "neigh_builds" in result["runtime_features_dropped"]  # only known at the end of the run
    assert result["n_train"] > 0 and result["n_test"] > result["n_train"]


def test_evaluate_runtime_auto_reports_the_choice_and_the_noise_floor(capsys):
    """Default ``--learner auto`` on a real sweep (CP2K): the learner train-runtime would
    serve, why, and the held-out runs' repetition noise."""
    from hpcpredict.daemon.runtime.artifacts import SERVABLE

    assert main(["evaluate", "runtime", str(DATA / "cp2k_water.csv"), "--target", "runtime_s", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["learner"] in SERVABLE and set(result["cv_mape"]) == set(SERVABLE)
    assert result["selection"]["reason"] and result["runs_not_served"] == 0
    assert 0 < result["repetition_mape"] < 1
    assert main(["evaluate", "runtime", str(DATA / "cp2k_water.csv"), "--target", "runtime_s"]) == 0
    out = capsys.readouterr().out
    assert "chosen:" in out and "repetition noise" in out


def test_evaluate_runtime_table_and_errors(capsys, tmp_path):
    csv = tmp_path / "runs.csv"
    csv.write_text("n,t\n" + "\n".join(f"{n},{n * 2}" for n in range(1, 30)) + "\n")
    assert main(["evaluate", "runtime", str(csv), "--target", "t", "--learner", "linear"]) == 0
    assert "MAPE" in capsys.readouterr().out
    assert main(["evaluate", "runtime", str(csv), "--target", "missing"]) == 1
    assert "no target column 'missing'" in capsys.readouterr().err
    assert main(["evaluate", "runtime", str(csv), "--target", "t", "--train-fraction", "1.5"]) == 1
    assert "--train-fraction" in capsys.readouterr().err
    assert main(["evaluate", "runtime", str(tmp_path / "none.csv"), "--target", "t"]) == 1


def test_suggest_runs_cli(capsys, tmp_path):
    done = tmp_path / "done.csv"
    done.write_text("n,solver,t\n" + "\n".join(f"{n},{s},{n * n * (1 + (s == 'lu'))}"
                                               for n in (1, 2, 3, 4) for s in ("cg", "lu")))
    assert main(["suggest-runs", "--done", str(done), "--target", "t", "--grid", "n=1,2,3,4,8,16",
                 "--grid", "solver=cg,lu", "-k", "2", "--members", "3", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["suggestions"]) == 2 and result["n_candidates"] == 12
    assert all(row["n"] in (8.0, 16.0) for row in result["suggestions"])
    assert main(["suggest-runs", "--done", str(done), "--target", "t", "--grid", "bad"]) == 1
    assert "--grid" in capsys.readouterr().err


def test_train_runtime_publishes_the_chosen_learner(capsys, tmp_path, monkeypatch):
    from hpcpredict.daemon.registry import ModelRegistry
    from hpcpredict.daemon.runtime.served import ApplicationModels

    monkeypatch.setenv("HPCPREDICT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("HPCPREDICT_MODELS_BUNDLED", "false")
    csv = tmp_path / "runs.csv"
    csv.write_text("n,m,t\n" + "\n".join(f"{n},{m},{n * n * m / 100:.4f}" for n in range(5, 40, 3) for m in (1, 2, 3)))
    # (the ANN path of the same code is covered in test_ann_artifact.py with small, fast nets)
    assert main(["train-runtime", str(csv), "--target", "t", "--application", "demo", "--learner", "extra-trees",
                 "--no-reload"]) == 0
    out = capsys.readouterr().out
    assert "inputs: extra-trees (cross-validated MAPE: extra-trees " in out
    model_dir = ModelRegistry(tmp_path / "data" / "models").current("runtime").model_path
    estimate = ApplicationModels.load(model_dir).estimate("demo", {"n": 20.0, "m": 2.0}, 1, 1, 1)
    assert estimate.model_name == "runtime-extra-trees/demo/inputs"
    assert abs(estimate.runtime_s - 8.0) / 8.0 < 0.3
    # only servable learners can be asked for: one line naming them, exit 1, nothing published
    assert main(["train-runtime", str(csv), "--target", "t", "--application", "demo", "--learner", "linear"]) == 1
    assert "'linear': not a servable learner (one of auto, " in capsys.readouterr().err
