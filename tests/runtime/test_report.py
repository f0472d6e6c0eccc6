import os
import subprocess
import sys

import pytest

from hpcpredict.daemon.runtime.report import (ReportedFeature, format_feature_line, latest_values,
                                              parse_feature_lines, report)


def test_report_appends_protocol_lines_to_file_named_by_environment(tmp_path, monkeypatch):
    target = tmp_path / "features"
    monkeypatch.setenv("HPCPREDICT_FEATURES_FILE", str(target))
    report("iterations", 400, at_s=1.5)
    report("solver", "cg", at_s=2.0)
    report("converged", True)
    assert target.read_text().splitlines()[:2] == ["HPCPREDICT t=1.5 iterations=400", "HPCPREDICT t=2.0 solver=cg"]
    features = parse_feature_lines(target.read_text())
    assert features[:2] == [ReportedFeature("iterations", 400.0, 1.5), ReportedFeature("solver", "cg", 2.0)]
    assert features[2].key == "converged" and features[2].value is True and features[2].at_s >= 0


def test_other_processes_and_languages_use_the_same_file(tmp_path):
    target = tmp_path / "features"
    env = dict(os.environ, HPCPREDICT_FEATURES_FILE=str(target), HPCPREDICT_T0="0")
    subprocess.run(["sh", "-c", 'echo "HPCPREDICT t=3 nx=64 ny=32" >> "$HPCPREDICT_FEATURES_FILE"'], env=env, check=True)
    subprocess.run([sys.executable, "-c", "from hpcpredict.daemon.runtime.report import report; report('nz', 8)"],
                   env=env, check=True)
    values, times = latest_values(parse_feature_lines(target.read_bytes()))
    assert values == {"nx": 64.0, "ny": 32.0, "nz": 8.0}
    assert times["nx"] == 3.0 and times["nz"] > 1e9  # T0=0: seconds since the epoch


def test_without_file_report_is_a_no_op(monkeypatch, tmp_path):
    monkeypatch.delenv("HPCPREDICT_FEATURES_FILE", raising=False)
    assert report("n", 1, at_s=0.5) == ReportedFeature("n", 1.0, 0.5)
    # an unwritable file never stops the application
    assert report("n", 1, path=str(tmp_path / "missing-dir" / "f")).key == "n"


@pytest.mark.parametrize("key, value", [("bad key", 1), ("t", 1), ("", 1), ("n", "two words"),
                                        ("n", float("nan")), ("n", "a=b")])
def test_bad_key_or_value_is_a_programming_error(key, value):
    with pytest.raises(ValueError):
        format_feature_line({key: value}, at_s=1.0)


def test_parser_skips_malformed_lines():
    text = "\n".join([
        "HPCPREDICT t=1 a=1", "HPCPREDICT a=2", "HPCPREDICT t=-1 a=3", "HPCPREDICT t=x a=4",
        "hpcpredict t=1 a=5", "HPCPREDICT t=2 b= =3 c=ok !=1", "random output", "HPCPREDICT t=2",
    ])
    assert parse_feature_lines(text) == [ReportedFeature("a", 1.0, 1.0), ReportedFeature("c", "ok", 2.0)]
