"""`hpcpredict scaling ...` end to end through the real CLI entry point."""
import json
from pathlib import Path

import pytest

from hpcpredict.daemon.cli.main import main

DATA = Path(__file__).parents[1] / "data" / "scaling"


def _write_strong_scaling(tmp_path: Path) -> Path:
    path = tmp_path / "runs.jsonl"
    lines = []
    for p in (1, 2, 4, 8, 16, 32):
        t = 30 + 960 / p
        lines.append(json.dumps({"params": {"p": p}, "callpath": "main", "metric": "time",
                                 "value": [t * 0.99, t, t * 1.01]}))
        lines.append(json.dumps({"params": {"p": p}, "callpath": "main", "metric": "bytes", "value": [1000 * p]}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_fit_json_with_predictions_and_saved_model(tmp_path, capsys):
    data = _write_strong_scaling(tmp_path)
    points = tmp_path / "points.csv"
    points.write_text("p\n64\n128\n")
    code = main(["scaling", "fit", str(data), "--predict-at", str(points), "--json",
                 "--save-model", str(tmp_path / "models"), "--application", "jacobi", "--callpath", "main"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    models = {(m["callpath"], m["metric"]): m for m in out["models"]}
    time_model = models[("main", "time")]
    assert time_model["terms"][0]["exponents"] == {"p": [-1.0, 0]}
    assert time_model["noise"] == pytest.approx(0.02, abs=1e-9)
    assert time_model["location"] == "median"          # regression modeler: seed 001's medians
    assert time_model["predictions"][0]["value"] == pytest.approx(30 + 960 / 64, rel=0.02)
    assert models[("main", "bytes")]["terms"][0]["exponents"] == {"p": [1.0, 0]}
    assert Path(out["saved_model"]).name == "jacobi.json"

    code = main(["scaling", "advise", out["saved_model"], "--nodes", "4", "--ntasks-per-node", "2",
                 "--time", "300", "--policy", "meets-request"])
    table = capsys.readouterr().out.splitlines()
    assert code == 0 and table[1].split()[0] == "nodes"
    marked = [line for line in table if line.endswith("*")]
    assert len(marked) == 1


def test_fit_human_output_and_adaptive(tmp_path, capsys):
    data = _write_strong_scaling(tmp_path)
    assert main(["scaling", "fit", str(data), "--modeler", "adaptive", "--adapt-samples", "20"]) == 0
    out = capsys.readouterr().out
    assert "main / time:" in out and "p^(-1)" in out
    assert "of repetitions, CV SMAPE" in out  # which location estimate was fitted (mean or median)


@pytest.mark.parametrize("args, message", [
    (["scaling", "fit", str(DATA / "negative" / "bad-value.jsonl")], "bad-value.jsonl:2: invalid JSON"),
    (["scaling", "fit", "/nonexistent.jsonl"], "cannot read"),
])
def test_fit_errors_are_one_line(args, message, capsys):
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("hpcpredict: ") and message in err and "Traceback" not in err


def test_fit_refuses_four_values(tmp_path, capsys):
    path = tmp_path / "four.jsonl"
    path.write_text("\n".join(json.dumps({"params": {"p": p}, "value": [p]}) for p in (1, 2, 4, 8)))
    assert main(["scaling", "fit", str(path), "--json"]) == 1
    assert "at least 5" in capsys.readouterr().err


def test_bad_points_csv(tmp_path, capsys):
    data = _write_strong_scaling(tmp_path)
    points = tmp_path / "points.csv"
    points.write_text("p\nabc\n")
    assert main(["scaling", "fit", str(data), "--predict-at", str(points)]) == 1
    assert "points.csv:2: not a number" in capsys.readouterr().err


def test_apmt_command_on_constructed_hw_counters(capsys):
    assert main(["scaling", "apmt", str(DATA / "hw-counters-CONSTRUCTED" / "manifest.json"),
                 "--predict-at", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["compute_source"] == "hardware counters" and out["predictions"][-1]["processes"] == 8
