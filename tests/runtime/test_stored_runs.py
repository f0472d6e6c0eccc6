"""Jobs whose runtime features were relayed become training rows: `train-runtime --from-store`
reads them from a real SQLite store (written as the daemon writes outcomes) and publishes a
model with the ``runtime`` variant that uses the reported feature."""
from __future__ import annotations

import pytest

from hpcpredict.daemon.cli.main import main
from hpcpredict.daemon.records import JobRecord
from hpcpredict.daemon.lab.runtime.dataset import parse_runs_csv
from hpcpredict.daemon.lab.runtime.stored_runs import runs_csv


def job(index: int, *, application="demo", state="COMPLETED", reported=True) -> JobRecord:
    size = 4 + index % 9                  # known at submission
    steps = 10 * (1 + index % 5)          # reported 2 s into the run
    inputs = {"size": float(size)}
    if reported:
        inputs.update(steps=float(steps), **{"steps@t": 2.0})
    return JobRecord(f"{index}", "ann", 1_700_000_000 + index, runtime_s=float(size * steps), application=application,
                     state=state, end_time=1_700_001_000 + index, inputs=inputs)


def test_the_table_keeps_completed_runs_of_the_application_with_report_times():
    jobs = [job(1), job(2, state="TIMEOUT"), job(3, application="other"), job(4, reported=False)]
    text, count = runs_csv(jobs, "demo")
    assert count == 2
    table = parse_runs_csv(text, target="runtime_s")
    assert table.inputs == ["size", "steps"]
    assert table.rows == [{"size": 5.0, "steps": 20.0}, {"size": 8.0}]
    assert table.users.tolist() == ["ann", "ann"]
    assert table.y.tolist() == [100.0, 400.0]
    assert table.report_times["steps"][0] == 2.0 and table.report_times["steps"][1] != table.report_times["steps"][1]


def test_train_runtime_from_store_uses_the_reported_feature(capsys, tmp_path, monkeypatch):
    from hpcpredict.daemon.registry import ModelRegistry
    from hpcpredict.daemon.runtime.served import ApplicationModels
    from hpcpredict.daemon.store import SQLiteStore

    monkeypatch.setenv("HPCPREDICT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("HPCPREDICT_MODELS_BUNDLED", "false")
    (tmp_path / "data").mkdir()
    store = SQLiteStore(str(tmp_path / "data" / "hpcpredict.sqlite"))
    try:
        for index in range(90):
            assert store.record_outcome(job(index))
    finally:
        store.close()
    assert main(["train-runtime", "--from-store", "--application", "demo", "--learner", "extra-trees",
                 "--no-reload"]) == 0
    out = capsys.readouterr().out
    assert "90 stored runs of demo" in out and "runtime: extra-trees" in out
    models = ApplicationModels.load(ModelRegistry(tmp_path / "data" / "models").current("runtime").model_path)
    # one user's runs: her own model, served for her jobs only (no pool of agreeing users)
    refined = models.estimate("demo", {"size": 8.0, "steps": 40.0}, 1, 1, 1, user="ann")
    assert refined.model_name == "runtime-extra-trees/demo/users/ann/runtime"
    assert abs(refined.runtime_s - 320.0) / 320.0 < 0.25
    assert models.estimate("demo", {"size": 8.0, "steps": 40.0}, 1, 1, 1, user="bob") is None


@pytest.mark.parametrize("args, message", [
    (["train-runtime", "--application", "demo"], "give DATA.csv or --from-store"),
    (["train-runtime", "--from-store", "--application", "nothing"], "no COMPLETED job of application 'nothing'"),
])
def test_train_runtime_from_store_errors(capsys, tmp_path, monkeypatch, args, message):
    monkeypatch.setenv("HPCPREDICT_DATA_DIR", str(tmp_path / "data"))
    assert main(args) == 1
    assert message in capsys.readouterr().err


def test_docstring_example():
    import doctest

    from hpcpredict.daemon.lab.runtime import stored_runs

    result = doctest.testmod(stored_runs)
    assert result.attempted > 0 and result.failed == 0
