"""A data directory with real models and real history, for the load benchmark and the profile.

* history: a real trace (SWF from the Parallel Workloads Archive) ingested into the store,
  so the recent-history model answers from real per-user runs;
* runtime: a model of LAMMPS "melt" trained on the repository's measured runs
  (``tests/data/runtime/lammps_melt.csv``), published as application ``lmp``: extra-trees
  (100 trees, the costlier walk) by default, or the ANN ensemble that cross-validation picks
  for this data (``learner="ann"``); ``learner=None`` publishes none, so the bundled models
  (``daemon/bundled_models``: LAMMPS runtime, stencil scaling) answer;
* the walltime model trained on that history (``hpcpredict train``), published.

Requests mix the two paths: jobs of trace users (history answers) and LAMMPS jobs whose
script carries the deck inputs (runtime model answers).
"""
from __future__ import annotations

import logging
import random
import tempfile
from pathlib import Path

from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
DEFAULT_TRACE = REPO / "tests" / "data" / "traces" / "hpc2n-subset.swf"
KTH = REPO / "tests" / "data" / "traces" / "KTH-SP2.swf"   # the load benchmarks' history
RUNS_CSV = REPO / "tests" / "data" / "runtime" / "lammps_melt.csv"
INPUT_COLUMNS = ("x", "y", "z", "steps", "cutoff", "skin", "temp", "newton")


def build_world(data_dir: Path, trace: Path = DEFAULT_TRACE, n_trees: int = 100,
                learner: str | None = "extra-trees") -> dict:
    """Fill ``data_dir`` (store + published models); returns what was put there."""
    from hpcpredict.daemon.config import load_config
    from hpcpredict.daemon.lab.history import read_trace
    from hpcpredict.daemon.registry import ModelRegistry
    from hpcpredict.daemon.store import open_store

    data_dir = Path(data_dir)
    config = load_config(None, environ={"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(data_dir)})
    store = open_store(config)
    records = read_trace(trace) if trace.exists() else []
    store.add_jobs(records, f"swf:{trace.name}")
    store.close()
    registry = ModelRegistry(config.models.dir)
    published = {"history_jobs": len(records), "runtime_inputs": list(INPUT_COLUMNS)}
    if learner is None:
        published["runtime"] = "bundled"
    else:
        published.update(_publish_runtime(registry, learner, n_trees))
    try:
        from hpcpredict.daemon.lab.refresh import train_and_publish
        published["walltime"] = train_and_publish(config)[0].version
    except Exception as error:  # the walltime model is another issue's; serve without it
        logger.info("no walltime model published: %s", error)
        published["walltime"] = f"none ({type(error).__name__})"
    published["users"] = sorted({r.user for r in records})[:200]
    return published


def _publish_runtime(registry, learner: str, n_trees: int) -> dict:
    from hpcpredict.daemon.lab.runtime import RuntimeModel, parse_runs_csv, save_application_model

    # only the deck's inputs (the other columns are measurements made while the job runs)
    lines = [line.split(",") for line in RUNS_CSV.read_text().splitlines() if line.strip()]
    keep = [lines[0].index(c) for c in INPUT_COLUMNS + ("runtime_s",)]
    text = "\n".join(",".join(row[i] for i in keep) for row in lines) + "\n"
    table = parse_runs_csv(text, target="runtime_s", source=str(RUNS_CSV))
    params = {"n_estimators": n_trees, "random_state": 0} if learner == "extra-trees" else {"random_state": 0}
    model = RuntimeModel(learner=learner, params=params).fit(table)
    with tempfile.TemporaryDirectory() as tmp:
        save_application_model(model, Path(tmp), application="lmp", metadata={"version": "bench"})
        return {"runtime": registry.publish("runtime", tmp).version, "runtime_inputs": list(model.required_inputs)}


LAMMPS_SCRIPT = """#!/bin/bash
# submission {serial}
#SBATCH -N {nodes}
#SBATCH -t 00:30:00
#HPCPREDICT x={x} y={y} z={z} steps={steps} cutoff={cutoff} skin={skin} temp={temp} newton={newton}
srun lmp -in in.melt
"""


def requests(world: dict, count: int, seed: int = 0) -> list[bytes]:
    """Serialized JobRequests: half LAMMPS jobs with inputs, half trace users' jobs.

    Every script is different (a serial number in a comment), as real submissions are, so no
    cache of parsed scripts can answer for the parser.
    """
    rng = random.Random(seed)
    users = world["users"] or ["alice"]
    out = []
    for i in range(count):
        if i % 2 == 0:
            nodes = rng.choice((1, 2, 4))
            script = LAMMPS_SCRIPT.format(serial=i, nodes=nodes, x=rng.randint(5, 20), y=rng.randint(5, 20),
                                          z=rng.randint(5, 20), steps=rng.choice((100, 300, 1000)),
                                          cutoff=round(rng.uniform(2.5, 3.0), 2), skin=0.2, temp=1.5,
                                          newton=rng.choice(("on", "off")))
            message = pb.JobRequest(job=pb.JobIdentity(user=rng.choice(users), application="lmp", job_name="melt"),
                                    resources=pb.Resources(nodes=nodes, ntasks=nodes * 4),
                                    time_limit_s=1800, script=script.encode())
        else:
            message = pb.JobRequest(job=pb.JobIdentity(user=rng.choice(users), application=str(rng.randint(1, 40)),
                                                       job_name="job"),
                                    resources=pb.Resources(nodes=rng.choice((1, 2, 8)), ntasks=16),
                                    time_limit_s=rng.choice((0, 3600, 86400)))
        out.append(message.SerializeToString())
    return out
