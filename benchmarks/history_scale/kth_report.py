"""`explain` and `report` on KTH-SP2 jobs that the real daemon predicted.

    python -m benchmarks.history_scale.kth_report [--last 2000] [--out benchmarks/results]

The first jobs of the trace are ingested and the walltime model trained on them; a real
``hpcpredictd`` is started on that store, and the last ``--last`` jobs are replayed through
it in time order: each job is predicted (Predict, with its user, size and request) when it is
submitted, and its outcome reported (ReportOutcome, linked by the prediction id) once it
ended, before any job submitted later is predicted. Then ``hpcpredict report --since`` (the
replayed period) and ``hpcpredict explain`` of one replayed job are run against the store,
and the report's plot is written to ``OUT/report-kth-sp2.png`` (its table beside it).
"""
from __future__ import annotations

import argparse
import heapq
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc

from benchmarks.load.openloop import start_daemon, stop_daemon
from hpcpredict.daemon.lab.history import end_time, read_trace, scorable
from hpcpredict.daemon.store import SQLiteStore
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from hpcpredict.proto.v1 import hpcpredict_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parents[2]
KTH = ROOT / "tests" / "data" / "traces" / "KTH-SP2.swf"


def _request(job) -> pb.JobRequest:
    return pb.JobRequest(job=pb.JobIdentity(user=job.user, account=job.account, partition=job.partition or "kth",
                                            application=job.application),
                         resources=pb.Resources(ntasks=max(job.procs, 1)),
                         time_limit_s=int(job.requested_time_s), submit_time=int(job.submit_time), job_id=job.job_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--last", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    args = parser.parse_args(argv)
    jobs = scorable(read_trace(KTH))
    history, replayed = jobs[:-args.last], jobs[-args.last:]
    work = Path(tempfile.mkdtemp(prefix="hpd-kth-report-"))
    env = {**os.environ, "HPCPREDICT_DATA_DIR": str(work)}
    try:
        store = SQLiteStore(str(work / "hpcpredict.sqlite"))
        store.add_jobs(history, "swf:KTH-SP2.swf")
        store.close()
        subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "train", "--no-reload"], env=env,
                       check=True)
        proc, info = start_daemon(work, {"HPCPREDICT_DAEMON_HOOK_SOCKET": ""})
        try:
            with grpc.insecure_channel(f"unix:{info['socket']}") as channel:
                stub = pb_grpc.PredictorStub(channel)
                running: list = []
                for job in replayed:
                    while running and running[0][0] <= job.submit_time:
                        _, _, done, prediction_id = heapq.heappop(running)
                        stub.ReportOutcome(pb.Outcome(job_id=done.job_id, prediction_id=prediction_id,
                                                      elapsed_s=done.runtime_s, state=done.state,
                                                      submit_time=int(done.submit_time),
                                                      start_time=int(max(done.start_time, 0)),
                                                      end_time=int(end_time(done))), timeout=30)
                    estimate = stub.Predict(_request(job), timeout=30)
                    heapq.heappush(running, (end_time(job), job.job_id, job, estimate.prediction_id))
                while running:
                    _, _, done, prediction_id = heapq.heappop(running)
                    stub.ReportOutcome(pb.Outcome(job_id=done.job_id, prediction_id=prediction_id,
                                                  elapsed_s=done.runtime_s, state=done.state,
                                                  submit_time=int(done.submit_time), end_time=int(end_time(done))),
                                       timeout=30)
        finally:
            stop_daemon(proc)
        since = replayed[0].submit_time
        from datetime import datetime, timezone

        date = datetime.fromtimestamp(since, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        args.out.mkdir(parents=True, exist_ok=True)
        plot = args.out / "report-kth-sp2.png"
        report = subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "report", "--since", date,
                                 "--plot", str(plot)], env=env, check=True, capture_output=True, text=True).stdout
        sample = replayed[len(replayed) // 2].job_id
        explain = subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "explain", sample], env=env,
                                 check=True, capture_output=True, text=True).stdout
        text = (f"$ hpcpredict report --since {date} --plot {plot.name}\n{report}\n"
                f"$ hpcpredict explain {sample}\n{explain}")
        (args.out / "report-kth-sp2.txt").write_text(text)
        print(text)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
