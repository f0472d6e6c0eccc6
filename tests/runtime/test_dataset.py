import pytest

from hpcpredict.daemon.errors import ParseError
from hpcpredict.daemon.lab.runtime.dataset import parse_runs_csv


@pytest.mark.parametrize("text, line, part", [
    ("", 0, ""),
    ("a,b\n1,2\n", 1, ""),
    ("a,t\n1,2\n3\n", 3, ""),
    ("a,t\n1,-2\n", 2, "-2"),
    ("a,t\n1,fast\n", 2, "fast"),
    ("a,t\n", 0, ""),
    ("a,a,t\n1,1,1\n", 1, ""),
])
def test_bad_tables_name_line_and_part(text, line, part):
    with pytest.raises(ParseError) as error:
        parse_runs_csv(text, target="t")
    assert error.value.line == line and error.value.part == part


def test_configurations_report_times_and_categoricals():
    table = parse_runs_csv("n,solver,rep,k,k@t,t\n1,cg,0,5,0.1,2\n1,cg,1,5,0.2,2.2\n2,cg,0,6,,4\n", target="t")
    assert table.inputs == ["n", "solver", "k"]
    assert table.groups.tolist() == [0, 0, 1]
    assert table.report_times["k"][:2].tolist() == [0.1, 0.2]
    assert table.rows[0] == {"n": 1.0, "solver": "cg", "k": 5.0}


def test_runtime_features_do_not_split_a_configuration():
    table = parse_runs_csv("n,rep,k,k@t,t\n1,0,5,0.1,2\n1,1,7,0.2,2.2\n2,0,6,0.1,4\n", target="t")
    assert table.groups.tolist() == [0, 0, 1]
    table = parse_runs_csv("config,n,t\nA,1,2\nB,1,2.2\nA,1,2.1\n", target="t")
    assert table.groups.tolist() == [0, 1, 0] and table.inputs == ["n"]
