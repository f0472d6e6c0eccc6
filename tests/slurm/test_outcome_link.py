"""The daemon links an outcome without a prediction id (a site tool rewrote AdminComment, our
field is gone) to the prediction it recorded at allocation under the same job id, made after
the job's submission. A real hpcpredictd over its local socket; the store file read back."""
from __future__ import annotations

import base64
import sqlite3
import time
import uuid

from .harness import poll


def stored_link(daemon, job_id: str):
    db = sqlite3.connect(str(daemon.data_dir / "hpcpredict.sqlite"))
    try:
        rows = db.execute("SELECT prediction_id FROM jobs WHERE job_id = ? AND source = 'outcome'", (job_id,)).fetchall()
    finally:
        db.close()
    return rows[0][0] if rows else None


def test_outcome_is_linked_by_job_id(daemon):
    job_id = f"link-{uuid.uuid4().hex[:8]}"
    now = int(time.time())
    request = {"job": {"user": "linkuser", "job_name": "x"}, "resources": {"nodes": 1}, "time_limit_s": 600,
               "script": base64.b64encode(b"#!/bin/sh\nsleep 1\n").decode(), "job_id": job_id}
    allocation = daemon.call("PredictAtAllocation", {"request": request, "node_list": "n01", "job_id": job_id})
    outcome = {"job_id": job_id, "state": "COMPLETED", "submit_time": now - 5, "start_time": now,
               "end_time": now + 3, "elapsed_s": 3, "request": request}
    assert daemon.call("ReportOutcome", outcome)["stored"] is True
    assert poll(lambda: stored_link(daemon, job_id), 10, "the outcome row") == allocation["prediction_id"]


def test_an_older_prediction_of_a_reused_job_id_is_not_linked(daemon):
    """Slurm reuses job ids (after MaxJobId, or a fresh StateSaveLocation): a prediction made
    before this job's submission belongs to another job."""
    job_id = f"reused-{uuid.uuid4().hex[:8]}"
    request = {"job": {"user": "linkuser", "job_name": "y"}, "resources": {"nodes": 1}, "time_limit_s": 600,
               "job_id": job_id}
    daemon.call("PredictAtAllocation", {"request": request, "node_list": "n01", "job_id": job_id})
    later = int(time.time()) + 60
    outcome = {"job_id": job_id, "state": "COMPLETED", "submit_time": later, "start_time": later + 1,
               "end_time": later + 4, "elapsed_s": 3, "request": request}
    assert daemon.call("ReportOutcome", outcome)["stored"] is True
    assert poll(lambda: stored_link(daemon, job_id) is not None, 10, "the outcome row")
    assert stored_link(daemon, job_id) == ""
