"""The local (hook) socket with the start-time forecast's thread running against it off, interleaved A/B.

    python -m benchmarks run hook_forecast [--jobs 2000] [--interval 1] [--rates 500] [--rounds 3] [--seconds 8]
                                           [--sbatch-line]

Two ``hpcpredictd`` of this tree (benchmarks/load/interleaved.py, latency from each request's due
time as in the ``hook`` area): ``forecast_off`` (``[forecast] enabled = false``) and ``forecast_on``,
whose thread reads a queue of ``--jobs`` jobs and forecasts it every ``--interval`` seconds (the
default refresh is 60 s: 1 s is the stress case). The queue is synthetic, in the real format of
daemon/forecast/queue.py (tests/data/slurm/squeue_forecast_22.05.txt is the real one: 9 jobs),
printed by a stand-in ``squeue``; the controller is the real 22.05.8 configuration and node list
of tests/data/slurm, printed by a stand-in ``scontrol`` (no controller runs in a benchmark).

``--sbatch-line``: both daemons forecast, ``sbatch_line_on`` also with ``[forecast] sbatch_line``
(the probes' table each refresh, daemon/forecast/probes.py; Predict's line looks it up). The
queue's running jobs fit the cluster's 32 CPUs (``fit_cpus``; before 2e7f819 the default queue's
did not, so the forecast refused it and its figures measured reading and encoding, no forecast).
"""
from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from benchmarks.load.interleaved import interleaved_ab
from benchmarks.load.world import REPO
from tests.forecast.stand_ins import stand_in_settings

DESCRIPTION = "local (hook) socket with the forecast thread refreshing vs off, open loop, interleaved A/B"
SIZES = (1, 2, 4, 8, 16, 32)
CLUSTER_CPUS = 32          # the 8 nodes x 4 CPUs of scontrol_show_nodes_22.05.txt


def synthetic_queue(jobs: int, now: int = 1796207263, fit_cpus: int = 0) -> str:
    """``jobs`` records: a quarter running (``fit_cpus``: only while they fit in so many CPUs), the
    rest pending in falling priority, limits 10 min - 1 d."""
    lines = []
    held = 0
    for index in range(jobs):
        running = index < jobs // 4 and (not fit_cpus or held + SIZES[index % 6] <= fit_cpus)
        held += SIZES[index % 6] if running else 0
        limit = (600, 3600, 7200, 86400)[index % 4]
        start = str(now - (index * 37) % limit) if running else "N/A"
        lines.append(f"{1000 + index}|{'RUNNING' if running else 'PENDING'}|u{index % 50}|debug|{SIZES[index % 6]}|"
                     f"{limit // 60}:00|0:00|{now - 3600}|{start}|{4294901759 - index}|")
    return "\n".join(lines) + "\n"


def run(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run hook_forecast")
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--rates", type=float, nargs="+", default=[500.0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--sbatch-line", action="store_true",
                        help="A/B of [forecast] sbatch_line off/on, both forecasting, on a queue that fits")
    args = parser.parse_args(argv)
    base = Path(tempfile.mkdtemp(prefix="hpd-hook-forecast-"))
    try:
        # running jobs that fit the cluster (more would be refused by the forecast: nothing measured)
        (base / "queue.txt").write_text(synthetic_queue(args.jobs, fit_cpus=CLUSTER_CPUS))
        common = {**stand_in_settings(base / "bin", queue=base / "queue.txt"),
                  "HPCPREDICT_FORECAST_INTERVAL_S": str(args.interval)}
        settings = {"forecast_off": {**common, "HPCPREDICT_FORECAST_ENABLED": "false"},
                    "forecast_on": {**common, "HPCPREDICT_FORECAST_ENABLED": "true"}}
        if args.sbatch_line:
            settings = {"sbatch_line_off": {**common, "HPCPREDICT_FORECAST_SBATCH_LINE": "false"},
                        "sbatch_line_on": {**common, "HPCPREDICT_FORECAST_SBATCH_LINE": "true"}}
        return {"jobs": args.jobs, "interval_s": args.interval, "sbatch_line": args.sbatch_line,
                **interleaved_ab(settings, args.rates, args.rounds, args.seconds, prefix="hpd-forecast-ab-")}
    finally:
        shutil.rmtree(base, ignore_errors=True)
