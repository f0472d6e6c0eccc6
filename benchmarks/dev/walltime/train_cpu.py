"""CPU seconds of ``train_model`` on N resampled KTH-SP2 jobs (as the walltime area's training
entry), for an A/B of two trees: run once as is and once with another tree first on the path.

    git archive OLD_COMMIT | tar -x -C /tmp/old/hpcpredict
    PYTHONPATH=/tmp/old nice -n 10 .venv/bin/python benchmarks/dev/walltime/train_cpu.py 1000000
    nice -n 10 .venv/bin/python benchmarks/dev/walltime/train_cpu.py 1000000
"""
import sys
import time
from pathlib import Path

import hpcpredict
from hpcpredict.daemon.lab.history.training import train_model
from hpcpredict.daemon.lab.history.traces import read_trace

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from benchmarks.walltime.training import resample  # noqa: E402  (after hpcpredict: the tree under test)

jobs = resample(read_trace(ROOT / "tests" / "data" / "traces" / "KTH-SP2.swf"), int(sys.argv[1]))
wall, cpu = time.perf_counter(), time.process_time()
train_model(jobs)
print(list(hpcpredict.__path__)[0], len(jobs), "jobs: train", round(time.perf_counter() - wall, 1), "s wall,",
      round(time.process_time() - cpu, 1), "s CPU", flush=True)
