"""Where a Predict's server time goes: per-component timings and a cProfile of the service.

    nice -n 10 .venv/bin/python -m benchmarks.load.profile_predict --calls 2000

In-process (no transport): the real PredictionService, engine, store and models of
:func:`benchmarks.load.world.build_world`, called with the same requests as the load
benchmark. Prints the mean cost of each step on its own, then the top of a cProfile.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.load.world import build_world, requests


def _mean_us(function, items, repeat: int = 1) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        for item in items:
            function(item)
    return (time.perf_counter() - start) / (len(items) * repeat) * 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--runtime-learner", choices=("ann", "extra-trees"), default="ann",
                        help="learner of the world's LAMMPS runtime model (the bundled one is an ANN)")
    args = parser.parse_args(argv)

    from hpcpredict.daemon.config import load_config
    from hpcpredict.daemon.jobspec import job_spec_from_request
    from hpcpredict.daemon.records import JobRecord
    from hpcpredict.daemon.runtime.inputs import extract_inputs
    from hpcpredict.daemon.server import Daemon
    from hpcpredict.daemon.service import estimate_message
    from hpcpredict.daemon.store import PredictionRow, SQLiteStore
    from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

    data_dir = Path(tempfile.mkdtemp(prefix="hpd-prof-"))
    world = build_world(data_dir, learner=args.runtime_learner)
    config = load_config(None, environ={"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(data_dir), "HPCPREDICT_DAEMON_HOOK_SOCKET": ""})
    daemon = Daemon(config)
    daemon.service.reload()
    service, engine, store = daemon.service, daemon.engine, daemon.store
    messages = [pb.JobRequest.FromString(b) for b in requests(world, args.calls)]
    lammps, history = messages[::2], messages[1::2]
    for message in messages[:200]:
        service.call("Predict", message, 0)

    specs = [job_spec_from_request(m, config.request_bounds) for m in messages]
    jobs = [JobRecord(job_id="", user=s.user, submit_time=0.0, requested_time_s=float(s.time_limit_s),
                      application=s.application, nodes=s.nodes) for s in specs]
    answers = [engine.estimate(s) for s in specs]
    rows = [PredictionRow(prediction_id=f"p{i}", job_id="", stage="submit", user="u", application="a",
                          created=0.0, runtime_s=1.0, low_s=0.0, high_s=2.0, bound_s=2.0, requested_time_s=0.0,
                          comm_time_s=None, model_name="m", model_version="1", fallback=False,
                          request=messages[i].SerializeToString()) for i in range(len(messages))]
    steps = [
        ("Predict, whole service call (LAMMPS job: script + runtime model)",
         _mean_us(lambda m: service.call("Predict", m, 0), lammps)),
        ("Predict, whole service call (trace job: recent history)",
         _mean_us(lambda m: service.call("Predict", m, 0), history)),
        ("  jobspec.job_spec_from_request, LAMMPS (includes extract_inputs)",
         _mean_us(lambda m: job_spec_from_request(m, config.request_bounds), lammps)),
        ("  runtime.inputs.extract_inputs alone (LAMMPS script)",
         _mean_us(lambda m: extract_inputs(bytes(m.script), {}), lammps)),
        ("  jobspec.job_spec_from_request, trace job",
         _mean_us(lambda m: job_spec_from_request(m, config.request_bounds), history)),
        ("  engine.estimate, LAMMPS", _mean_us(engine.estimate, specs[::2])),
        ("  engine.estimate, trace job", _mean_us(engine.estimate, specs[1::2])),
        ("    recent_history.predict (np.quantile inside)", _mean_us(lambda j: engine.recent.predict(j, 0.03), jobs)),
        (f"    runtime model estimate ({args.runtime_learner})",
         _mean_us(lambda s: engine.models.runtime.estimate(s.application, s.inputs, s.nodes, s.ntasks,
                                                            s.cpus_per_task), specs[::2])),
        ("  store.record_prediction (WAL, synchronous=NORMAL for this write)",
         _mean_us(store.record_prediction, rows)),
        ("  service.estimate_message (protobuf reply)", _mean_us(lambda a: estimate_message(a, "x" * 32), answers)),
        ("  request.SerializeToString (kept with the prediction)", _mean_us(lambda m: m.SerializeToString(), messages)),
    ]
    durable_rows = rows[: min(200, len(rows))]
    # The store offers no fsync'd prediction write: the same row through a connection of our own,
    # in its own IMMEDIATE transaction committed with synchronous=FULL, on a store file of the
    # same schema that the daemon does not write (sharing its file would race its journal flushes).
    fsync_path = str(data_dir / "fsync-comparison.sqlite")
    SQLiteStore(fsync_path).close()
    durable = sqlite3.connect(fsync_path, isolation_level=None)
    durable.execute("PRAGMA synchronous=FULL")

    def durable_write(row) -> None:
        durable.execute("BEGIN IMMEDIATE")
        durable.execute("INSERT OR REPLACE INTO predictions (prediction_id, job_id, stage, created, runtime_s, low_s, "
                        "high_s, bound_s, model_name, model_version, fallback) VALUES (?, '', 's', 0, 1, 0, 2, 2, "
                        "'m', '1', 0)", ("d" + row.prediction_id,))
        durable.execute("COMMIT")

    steps.append(("  for comparison: the same write with fsync (synchronous=FULL)",
                  _mean_us(durable_write, durable_rows)))
    durable.close()
    print(f"{'step':<72} mean µs")
    for name, micros in steps:
        print(f"{name:<72} {micros:8.0f}")

    profile = cProfile.Profile()
    profile.enable()
    for message in messages:
        service.call("Predict", message, 0)
    profile.disable()
    pstats.Stats(profile, stream=sys.stdout).sort_stats("tottime").print_stats(args.top)
    daemon.store.close()
    shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
