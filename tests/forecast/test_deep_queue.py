"""A queue deeper than the forecast runs (simulate.MAX_JOBS) is forecast on its first jobs, not
refused at every refresh; a job not yet submitted is still answered on a full picture.

The daemon's service is built as hpcpredictd builds it (not started); its squeue is a stand-in
printing 2,500 pending one-CPU jobs in the 22.05 capture's format (tests/data/slurm), the
cluster's size the real 22.05 capture's."""
from __future__ import annotations

from pathlib import Path

from hpcpredict.daemon.forecast.simulate import MAX_JOBS
from hpcpredict.daemon.forecast.types import QueuedJob
from tests.forecast.stand_ins import stand_in_daemon

DEPTH = 2500


def deep_service(tmp_path: Path, max_jobs: str):
    lines = "".join(f"{n}|PENDING|u{n % 7}|debug|1|10:00|0:00|1796207263|N/A|{4294901758 - n}|\n"
                    for n in range(2, 2 + DEPTH))
    (tmp_path / "queue.txt").write_text(lines)
    return stand_in_daemon(tmp_path, queue=tmp_path / "queue.txt", runs="2", max_jobs=max_jobs)


def test_a_queue_deeper_than_the_forecast_runs_is_forecast_on_its_first_jobs(tmp_path):
    daemon = deep_service(tmp_path, max_jobs="5000")     # a site asking for more than the forecast runs
    try:
        keeper = daemon.service.forecast
        keeper.refresh()
        assert keeper.error == "", keeper.error
        kept = keeper.latest()
        assert len(kept.snapshot.jobs) == MAX_JOBS and kept.left_out == DEPTH - MAX_JOBS
        assert len(kept.forecasts) == MAX_JOBS
        first = min(kept.snapshot.jobs, key=lambda job: job.priority_rank)
        extra = QueuedJob("new", "u1", "", 1, 600.0, None, 0.0, None, 0, None)
        _, answer = keeper.hypothetical(extra, 1000)      # a full picture has room made for it
        assert answer.median_start_s >= kept.forecasts[first.job_id].median_start_s
    finally:
        daemon.store.close()
