"""Every task of a job array reports its outcome (issue 39, finding 7), on the real Slurm 22.05
test cluster. ``squeue --jobs=<the array's id>`` lists every task of the array, so the epilog
of the task whose own id is the array's read the first task's record ("squeue answered job
'10', not '6'") and that task's outcome was lost."""
from __future__ import annotations

import subprocess

from .harness import poll
from .test_cluster_hooks import store

TASKS = 4


def test_every_task_of_a_job_array_reports_its_outcome(cluster, daemon):
    array_id, _, _, _ = cluster.sbatch("alice", "-N", "1", "-t", "5", "-J", "array", "-o", "/dev/null",
                                       f"--array=0-{TASKS - 1}", "--wrap", "sleep 1")

    def raw_ids():
        out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", array_id, "--format=JobIDRaw,State"], env=cluster.env(),
                             capture_output=True, text=True, timeout=30).stdout.split()
        done = {line.split("|")[0] for line in out if line.split("|")[1] == "COMPLETED"}
        return done if len(done) == TASKS else None

    tasks = poll(raw_ids, 150, f"the {TASKS} tasks of array {array_id} to complete", 1.0)
    assert array_id in tasks          # the task that keeps the array's own id

    def stored():
        db = store(daemon)
        try:
            found = {r.job_id: r for r in db.iter_jobs() if r.job_id in tasks}
        finally:
            db.close()
        return found if len(found) == TASKS else None

    found = poll(stored, 150, f"outcomes of tasks {sorted(tasks)}", 1.0)
    assert all(row.state == "COMPLETED" and row.user == "alice" for row in found.values()), found
    assert "squeue answered job" not in cluster.hooks_log()
