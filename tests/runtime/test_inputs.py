import pytest
from hypothesis import given, settings, strategies as st

from hpcpredict.daemon.runtime.inputs import JobInputs, ParseBudget, extract_inputs


@pytest.mark.parametrize("script, application, launcher, expected", [
    ("srun ./lulesh -s 40 -i 100\n", "lulesh", "srun", {"s": 40.0, "i": 100.0}),
    ("srun -N 2 -n 64 --cpu-bind=cores /opt/bin/xhpl --nb=192 --pmap row\n", "xhpl", "srun",
     {"nb": 192.0, "pmap": "row"}),
    ("mpirun -np 4 --mca btl self,vader --bind-to core ./a.out 100 2.5 mesh.dat\n", "a.out", "mpirun",
     {"arg1": 100.0, "arg2": 2.5, "arg3": "mesh.dat"}),
    ("mpiexec -n 8 -ppn 4 ./cg --precond --tol 1e-8 --restart=false\n", "cg", "mpiexec",
     {"precond": True, "tol": 1e-8, "restart": False}),
    ("./serial_code --size=300\n", "serial_code", "", {"size": 300.0}),
    ("module load python\npython3 -u train.py --epochs 5 --lr=0.1\n", "train.py", "", {"epochs": 5.0, "lr": 0.1}),
    ("OMP_NUM_THREADS=4 srun ./stencil -n -5\n", "stencil", "srun", {"n": -5.0}),
    ("exec srun ./app --x 1 | tee log\n", "app", "srun", {"x": 1.0}),
    ("srun ./app \\\n   --nx 64 \\\n   --ny 32\n", "app", "srun", {"nx": 64.0, "ny": 32.0}),
    ("", "", "", {}),
])
def test_launch_line(script, application, launcher, expected):
    job = extract_inputs(script)
    assert (job.application, job.launcher) == (application, launcher)
    assert job.inputs == expected


def test_exports_variables_directives_and_precedence():
    script = """#!/bin/bash
#SBATCH --nodes=2
export N=800 SOLVER="cg"
export STEPS=${N}
#HPCPREDICT app=mysolver mesh=fine N=900
srun ./solver.x -n $N --steps=${STEPS} --solver $SOLVER --home=$UNSET
srun ./second --ignored 1
"""
    job = extract_inputs(script, {"HOME": "/home/u"})
    assert job.application == "mysolver"
    assert job.inputs == {"N": 900.0, "SOLVER": "cg", "STEPS": "${N}", "n": 800.0, "steps": "${N}",
                          "solver": "cg", "home": "$UNSET", "mesh": "fine"}
    assert "ignored" not in job.inputs


def test_environment_expands_launch_line():
    job = extract_inputs("srun ./app --size=$SIZE\n", {"SIZE": "128"})
    assert job.inputs == {"size": 128.0}


def test_deck_read_only_with_reader_and_parsed():
    decks = {"in.deck": b"# comment\nnx = 128\nny=64 ! fortran comment\nsolver = 'gmres'\nlist = 1 2 3\n"
                        b"&namelist dt = 0.01,\n"}
    script = "srun ./code -in in.deck --nz 8\n"
    without = extract_inputs(script)
    assert without.inputs == {"in": "in.deck", "nz": 8.0}
    job = extract_inputs(script, deck_reader=decks.get)
    assert job.inputs["nx"] == 128.0 and job.inputs["ny"] == 64.0 and job.inputs["solver"] == "gmres"
    assert "list" not in job.inputs and job.inputs["nz"] == 8.0
    assert any("non-scalar" in w for w in job.warnings)


def test_deck_from_stdin_redirect_and_failing_reader():
    job = extract_inputs("mpirun ./lmp < in.melt\n", deck_reader=lambda name: b"steps = 100\n")
    assert job.inputs == {"steps": 100.0}

    def broken(name):
        raise PermissionError("denied")
    job = extract_inputs("mpirun ./lmp < in.melt\n", deck_reader=broken)
    assert job.application == "lmp" and any("cannot read" in w for w in job.warnings)


def test_bad_text_is_a_warning_not_an_error():
    job = extract_inputs(b"srun './app --a=1\n\xff\xfe srun\n")
    assert job.application == "app" and job.inputs["a"] == 1.0
    assert any("UTF-8" in w for w in job.warnings) and any("quotation" in w for w in job.warnings)


def test_size_limit():
    job = extract_inputs("srun ./app --a=1\n" + "#" * 3000, max_script_bytes=1000)
    assert job.inputs == {"a": 1.0} and any("longer than 1000" in w for w in job.warnings)


@pytest.mark.parametrize("script", [
    "srun " + "$" * 100_000,
    "srun ./a " + "${" * 50_000,
    "srun ./a " + "\\" * 100_000,
    "export " + "A=" * 50_000,
    "srun ./a " + "--x=" * 30_000,
    "\\\n" * 50_000 + "srun ./a",
    "#HPCPREDICT " + "=" * 100_000,
    "srun ./a " + " -x 1" * 20_000,
])
def test_pathological_scripts_finish(script):
    job = extract_inputs(script)
    assert isinstance(job, JobInputs) and len(job.inputs) <= 1024


@settings(max_examples=150, deadline=None)
@given(st.one_of(st.text(max_size=400), st.binary(max_size=400)))
def test_never_raises_on_arbitrary_input(script):
    job = extract_inputs(script, deck_reader=lambda name: b"k = v\n")
    assert isinstance(job.application, str) and isinstance(job.inputs, dict)
    assert all(isinstance(v, (float, str, bool)) for v in job.inputs.values())


def test_lammps_var_options():
    job = extract_inputs("srun lmp -nocite -var x 10 -var newton on -in in.melt\n")
    assert job.application == "lmp"
    assert job.inputs == {"nocite": True, "x": 10.0, "newton": True, "in": "in.melt"}


def test_launcher_after_many_commands_wins_over_first_command():
    job = extract_inputs("./prepare --mesh 3\n" * 2000 + "export N=5\nsrun ./app --n $N\n")
    assert (job.application, job.launcher) == ("app", "srun")
    assert job.inputs == {"N": 5.0, "n": 5.0}


def test_budgets_bound_work_and_say_so():
    script = "#HPCPREDICT a=1\n" * 1500 + "export A=1\n" * 1500 + "srun ./app\n"
    # the counts' own caps (with work to spare)...
    job = extract_inputs(script, budget=ParseBudget(1 << 20))
    assert any("directives" in w for w in job.warnings) and any("export lines" in w for w in job.warnings)
    assert job.application == "app"
    # ... and the default work budget, which 3,000 such lines exceed: no inputs at all, and why
    job = extract_inputs(script)
    assert (job.application, job.inputs) == ("", {}) and job.warnings[0].startswith("script too costly to read")
