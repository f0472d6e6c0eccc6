"""End to end on the real LAMMPS runs: train → artifacts → load → job script → estimate."""
from pathlib import Path

import numpy as np

from hpcpredict.daemon.lab.runtime.dataset import read_runs_csv
from hpcpredict.daemon.runtime.inputs import extract_inputs
from hpcpredict.daemon.runtime.report import parse_feature_lines
from hpcpredict.daemon.runtime.served import ApplicationModels
from hpcpredict.daemon.lab.runtime.training import train_application

DATA = Path(__file__).parent.parent / "data" / "runtime" / "lammps_melt.csv"


def test_train_publish_and_serve_lammps(tmp_path):
    summary = train_application(DATA, target="runtime_s", application="lmp", directory=tmp_path,
                                time_share=0.5, learners={"extra-trees": {"n_estimators": 30}})
    assert set(summary) == {"inputs", "runtime"}
    assert "neigh_builds" in summary["runtime"]["runtime_features_dropped"]
    assert summary["inputs"]["cv_mape"] < 0.5 and summary["inputs"]["learner"] == "extra-trees"
    models = ApplicationModels.load(tmp_path)
    table = read_runs_csv(DATA, target="runtime_s")
    row = table.rows[0]
    job = extract_inputs(
        "#!/bin/bash\n#SBATCH -n 1\nmodule load lammps\n"
        + "srun lmp -nocite " + " ".join(f"-var {k} {row[k]:g}" if isinstance(row[k], float) else f"-var {k} {row[k]}"
                                           for k in ("x", "y", "z", "steps", "cutoff", "skin", "temp"))
        + f" -var newton {'on' if row['newton'] else 'off'} -in in.melt\n")
    assert job.application == "lmp"
    at_submit = models.estimate(job.application, job.inputs, nodes=1, ntasks=1, cpus_per_task=1)
    assert at_submit is not None and at_submit.model_name.endswith("/inputs")
    assert at_submit.low_s < at_submit.runtime_s < at_submit.high_s
    assert abs(at_submit.runtime_s - table.y[0]) / table.y[0] < 0.5
    reported = parse_feature_lines(f"HPCPREDICT t=0.1 natoms={row['natoms']:g} cpu5={row['cpu5']} pe0={row['pe0']}")
    later = models.estimate(job.application, dict(job.inputs, **{f.key: f.value for f in reported}),
                            nodes=1, ntasks=1, cpus_per_task=1)
    assert later.model_name.endswith("/runtime") and np.isfinite(later.runtime_s)
