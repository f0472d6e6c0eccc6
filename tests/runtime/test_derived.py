"""Derived inputs: declared expressions of a job's inputs, computed in training and by the served model."""
import json
import time

import numpy as np
import pytest

from hpcpredict.daemon.cli.main import main
from hpcpredict.daemon.errors import ModelArtifactError, ParseError
from hpcpredict.daemon.lab.runtime.dataset import parse_runs_csv
from hpcpredict.daemon.runtime.derived import MAX_DERIVED, DerivedInputs
from hpcpredict.daemon.lab.runtime.model import RuntimeModel
from hpcpredict.daemon.lab.runtime.packing import save_application_model
from hpcpredict.daemon.runtime.served import ApplicationModels

# A cost that jumps where an FFT length rounds up (as CP2K's grid does): no smooth function of n follows it.
GRID = "grid=round_up(n * 1.7, 16, 20, 24, 30, 32, 40, 48, 60, 64) ** 3"


def _grid(n: float) -> float:
    return float(min(s for s in (16, 20, 24, 30, 32, 40, 48, 60, 64) if s >= n * 1.7) ** 3)


def _csv(seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    lines = ["config,rep,n,p,t"]
    for config in range(60):
        n, p = round(float(rng.uniform(9, 37)), 2), float(rng.choice([1, 2]))
        for rep in range(2):
            lines.append(f"{config},{rep},{n},{p},{_grid(n) / 2000 / p ** 0.8 * np.exp(rng.normal(0, 0.02)):.5f}")
    return "\n".join(lines)


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')", "n.real", "(lambda: 1)()", "[x for x in range(9)]", "n[0]", "'abc'",
    "n if n else 1", "n > 1", "open('/etc/passwd')", "sqrt(x=1)", "min(n)", "9" * 400 + " ** 2",
    "+".join(["n"] * 150),
])
def test_anything_but_arithmetic_is_refused_at_declaration(text):
    with pytest.raises(ValueError, match="derived input 'd'"):
        DerivedInputs([("d", text)])


def test_declarations_are_checked():
    for bad, message in ((["x"], "NAME=EXPRESSION"), (["1x=n"], "not a valid input name"),
                         (["a=n", "a=n"], "declared twice"), (["a=a+1"], "uses itself"), (["a=n+"], "cannot parse")):
        with pytest.raises(ValueError, match=message):
            DerivedInputs.parse(bad)
    with pytest.raises(ValueError, match=f"at most {MAX_DERIVED}"):
        DerivedInputs.parse([f"d{i}=n" for i in range(MAX_DERIVED + 1)])


def test_a_value_that_cannot_be_computed_is_missing_not_an_error():
    derived = DerivedInputs.parse(["big=exp(n)", "tower=10 ** 10 ** (n * 200)", "ratio=1 / (n - 2)", "root=sqrt(n - 9)",
                                   "flag=n * on", "later=ratio * 2"])
    start = time.process_time()
    values = derived.apply({"n": 2.0, "on": True})
    assert time.process_time() - start < 1.0   # 10**10**400 is a float overflow, not a huge integer
    assert values == {"n": 2.0, "on": True, "big": pytest.approx(np.exp(2.0))}
    assert derived.apply({"n": 1e6})["n"] == 1e6 and "big" not in derived.apply({"n": 1e6})
    assert derived.apply({"n": 3.0})["later"] == 2.0            # a later expression reads an earlier one
    assert derived.apply({"n": "large"}) == {"n": "large"}      # not a number: every derived input missing
    assert derived.apply({"n": 4.0, "big": 1.0})["big"] == pytest.approx(np.exp(4.0))  # a stated value is replaced


def test_run_table_checks_names_against_its_columns():
    text = "n,p,t\n1,1,2\n2,1,3\n"
    with pytest.raises(ParseError, match="named like columns: p"):
        parse_runs_csv(text, target="t", derived=DerivedInputs.parse(["p=n*2"]))
    with pytest.raises(ParseError, match="not columns: m"):
        parse_runs_csv(text, target="t", derived=DerivedInputs.parse(["q=m*2"]))
    table = parse_runs_csv(text, target="t", derived=DerivedInputs.parse(["q=n*p"]))
    assert table.inputs == ["n", "p", "q"] and [row["q"] for row in table.rows] == [1.0, 2.0]


def test_served_model_computes_the_derived_input_from_a_jobs_stated_inputs(tmp_path):
    table = parse_runs_csv(_csv(), target="t", derived=DerivedInputs.parse([GRID]))
    model = RuntimeModel("log-linear").fit(table)
    save_application_model(model, tmp_path, application="dft", metadata={"variant": "inputs"})
    stored = json.loads((tmp_path / "dft" / "inputs.json").read_text())
    assert stored["derived_inputs"] == [["grid", GRID.split("=", 1)[1]]]
    models = ApplicationModels.load(tmp_path)
    for n in (10.0, 14.0, 14.2, 23.0, 28.3, 35.0):
        estimate = models.estimate("dft", {"n": n, "p": 2.0}, nodes=1, ntasks=2, cpus_per_task=1)
        assert estimate.runtime_s == pytest.approx(model.predict([{"n": n, "p": 2.0}])[0], rel=1e-9)
        assert estimate.runtime_s == pytest.approx(_grid(n) / 2000 / 2 ** 0.8, rel=0.08)
        assert f"grid={_grid(n)}" in " ".join(estimate.explanation)
    # The jump the derived input carries: 14.0 → 24, 14.2 → 30 (+95 % of cost) for 1.4 % more n.
    low, high = (models.estimate("dft", {"n": n, "p": 1.0}, 1, 1, 1).runtime_s for n in (14.0, 14.2))
    assert high / low == pytest.approx((30 / 24) ** 3, rel=0.1)
    assert models.estimate("dft", {"p": 1.0}, 1, 1, 1) is None     # its source input missing: declined


def test_the_derived_input_is_what_makes_the_model_right():
    """Held-out error with and without the declaration (same runs, same learner)."""
    errors = {}
    for declared in ([], [GRID]):
        table = parse_runs_csv(_csv(), target="t", derived=DerivedInputs.parse(declared))
        train, test = np.arange(0, 80), np.arange(80, 120)
        model = RuntimeModel("log-linear").fit(table, train)
        predicted = model.predict([table.rows[i] for i in test])
        errors[bool(declared)] = float(np.mean(np.abs(predicted - table.y[test]) / table.y[test]))
    assert errors[True] < 0.05 < errors[False]


def test_a_corrupt_declaration_in_an_artifact_is_a_model_error(tmp_path):
    table = parse_runs_csv(_csv(), target="t", derived=DerivedInputs.parse([GRID]))
    save_application_model(RuntimeModel("log-linear").fit(table), tmp_path, application="dft", metadata={})
    path = tmp_path / "dft" / "inputs.json"
    description = json.loads(path.read_text())
    description["derived_inputs"] = [["grid", "__import__('os').getcwd()"]]
    path.write_text(json.dumps(description))
    with pytest.raises(ModelArtifactError, match="corrupt model: bad derived inputs.*unknown function"):
        ApplicationModels.load(tmp_path)


def test_cli_derive_option(capsys, tmp_path):
    csv = tmp_path / "runs.csv"
    csv.write_text(_csv())
    assert main(["evaluate", "runtime", str(csv), "--target", "t", "--learner", "log-linear", "--json",
                 "--derive", GRID]) == 0
    result = json.loads(capsys.readouterr().out)
    assert "grid" in result["inputs_required"] and result["mape"] < 0.05
    assert main(["evaluate", "runtime", str(csv), "--target", "t", "--derive", "grid=os.getcwd()"]) == 1
    assert "--derive" in capsys.readouterr().err


# A categorical input's implied quantity: basis functions per molecule of a named basis (NWChem's counts).
FUNCTIONS = "functions=n * choose(basis, 'sto-3g', 7, '6-31g*', 19, 'cc-pvdz', 25)"


@pytest.mark.parametrize("text, message", [
    ("choose(basis)", "key, value pairs"), ("choose(basis, 'a')", "key, value pairs"),
    ("choose(basis, 'a', 1, 'b')", "key, value pairs"),
    ("choose(basis, " + ", ".join(f"{i}, {i}" for i in range(65)) + ")", "key, value pairs"),
    ("choose('sto-3g', 'sto-3g', 1)", "is not allowed"), ("choose(n > 2, 1, 1)", "is not allowed"),
    ("choose(basis, n, 1)", "keys must be quoted words or numbers"), ("choose(basis, True, 1)", "keys must be"),
    ("choose(basis, 'a', 1, 'a', 2)", "the key 'a' twice"), ("choose(basis, 1, 1, 1.0, 2)", "the key 1.0 twice"),
    ("choose(basis, 'a', 1, key='b')", "no keyword arguments"), ("choose(n, " + "9" * 400 + ", 1)", "too large"),
    ("choose(basis, 'a', __import__('os'))", "unknown function '__import__'"),
    ("choose(basis, 'a', 'b') * 2", "is not allowed"),        # a word is a key, or a value of a whole-expression choose
    ("n * choose(basis, 'a', 'b')", "is not allowed"), ("sqrt(choose(basis, 'a', 'b'))", "is not allowed"),
    ("choose(basis, 'a', 'b', 'c', 1)", "all quoted words or all numbers"),
    ("choose(basis, 'a', choose(n, 1, 'x'), 'b', 2)", "all quoted words or all numbers"),
    ("n * 'sto-3g'", "is not allowed"),
])
def test_choose_is_refused_unless_well_formed(text, message):
    with pytest.raises(ValueError, match=message):
        DerivedInputs([("d", text)])


def test_choose_maps_a_categorical_input_and_is_missing_for_an_unknown_key():
    derived = DerivedInputs.parse([FUNCTIONS, "nodes_cost=choose(p, 1, 1.0, 2, n / 2)"])
    assert derived.sources == {"functions": ["basis", "n"], "nodes_cost": ["n", "p"]}
    assert derived.apply({"n": 3.0, "basis": "6-31g*", "p": 2.0}) == {
        "n": 3.0, "basis": "6-31g*", "p": 2.0, "functions": 57.0, "nodes_cost": 1.5}
    assert derived.apply({"n": 3.0, "basis": "cc-pvdz", "p": 1})["nodes_cost"] == 1.0   # an int key matches 1
    for unknown in ("6-31G*", "def2-svp", "", 7.0, True, None):   # case matters; no default: missing
        assert "functions" not in derived.apply({"n": 3.0, "basis": unknown})
    assert "functions" not in derived.apply({"basis": "sto-3g"})                  # the chosen value's input missing
    grid = DerivedInputs.parse(["setup=choose(round_up(box / 0.12, 24, 25, 28), 24, 0.8, 25, 0.3, 28, 0.4)"])
    assert [grid.apply({"box": box}).get("setup") for box in (2.8, 2.95, 3.1, 3.5, "big")] == [0.8, 0.3, 0.4, None, None]


def _basis_csv(seed: int = 0) -> str:
    """Runs whose cost is (n · functions per molecule)^2.5: shared by every basis."""
    rng = np.random.default_rng(seed)
    per = {"sto-3g": 7, "6-31g*": 19, "cc-pvdz": 25}
    lines = ["config,rep,n,basis,t"]
    for config in range(45):
        n, basis = int(rng.integers(1, 9)), str(rng.choice(list(per)))
        for rep in range(2):
            lines.append(f"{config},{rep},{n},{basis},{(n * per[basis]) ** 2.5 / 1e4 * np.exp(rng.normal(0, 0.02)):.6f}")
    return "\n".join(lines)


def test_served_model_chooses_from_a_jobs_stated_category(tmp_path):
    table = parse_runs_csv(_basis_csv(), target="t", derived=DerivedInputs.parse([FUNCTIONS]))
    model = RuntimeModel("log-linear").fit(table)
    save_application_model(model, tmp_path, application="qc", metadata={"variant": "inputs"})
    models = ApplicationModels.load(tmp_path)
    for n, basis, functions in ((2, "sto-3g", 14), (5, "cc-pvdz", 125), (8, "6-31g*", 152)):
        estimate = models.estimate("qc", {"n": float(n), "basis": basis}, nodes=1, ntasks=1, cpus_per_task=1)
        assert estimate.runtime_s == pytest.approx(functions ** 2.5 / 1e4, rel=0.08)
        assert f"functions={float(functions)}" in " ".join(estimate.explanation)


# A choice a code makes (the FFT length it accepts), whose cost is not monotone in it: a word per length.
GRID_WORD = "grid=choose(round_up(box / 0.12 - 0.000001, 24, 25, 28), 24, 'g24', 25, 'g25', 28, 'g28')"
GRID_FACTOR = {"g24": 3.0, "g25": 1.0, "g28": 2.0}


def _grid_word(box: float) -> str:
    return "g" + str(min(edge for edge in (24, 25, 28) if edge >= box / 0.12 - 1e-6))


def test_a_word_valued_choose_is_a_categorical_input_the_served_model_computes(tmp_path):
    rng = np.random.default_rng(0)
    lines = ["config,rep,box,t"]
    for config in range(40):
        box = round(float(rng.uniform(2.6, 3.3)), 3)
        lines += [f"{config},{rep},{box},{box ** 3 * GRID_FACTOR[_grid_word(box)] * np.exp(rng.normal(0, 0.01)):.6f}"
                  for rep in range(2)]
    table = parse_runs_csv("\n".join(lines), target="t", derived=DerivedInputs.parse([GRID_WORD]))
    assert {row["grid"] for row in table.rows} == set(GRID_FACTOR)
    model = RuntimeModel("log-linear", {"startup_shares": ()}).fit(table)
    assert model.encoder_.feature_names == ["box", "grid=g24", "grid=g25", "grid=g28"]
    save_application_model(model, tmp_path, application="md", metadata={"variant": "inputs"})
    models = ApplicationModels.load(tmp_path)
    for box in (2.75, 2.95, 3.2):   # 3 → 1 → 2: no smooth function of the box follows the factor
        estimate = models.estimate("md", {"box": box}, nodes=1, ntasks=1, cpus_per_task=1)
        assert estimate.runtime_s == pytest.approx(box ** 3 * GRID_FACTOR[_grid_word(box)], rel=0.05)
    assert models.estimate("md", {"box": 3.5}, nodes=1, ntasks=1, cpus_per_task=1) is None   # no grid word: declined
