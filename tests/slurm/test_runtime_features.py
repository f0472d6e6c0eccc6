"""Runtime features reported from inside a real Slurm job reach the daemon and the job's history.

The TaskProlog exports ``HPCPREDICT_FEATURES_FILE`` into the job; the job (and an srun step)
appends ``HPCPREDICT t=... key=value`` lines; EpilogSlurmctld, running as SlurmUser (root on
the test cluster: the most a planted link could reach), reads the file and relays it with
ReportRuntimeFeatures; the outcome row then carries the values and report times. Each job
runs in a directory its user owns, as a home directory is, so a link the user plants there is
followed by a naive reader (the kernel's protected_symlinks guards only sticky world-writable
directories).
"""
from __future__ import annotations

import json
import os
import pwd
import sqlite3
import uuid

from .harness import poll

FEATURES_SCRIPT = """#!/bin/bash
#SBATCH -N 1
#SBATCH -J features-app
echo "file=$HPCPREDICT_FEATURES_FILE t0=$HPCPREDICT_T0"
echo "HPCPREDICT t=1.5 iterations=400 solver=cg" >> "$HPCPREDICT_FEATURES_FILE"
srun -n 1 bash -c 'echo "HPCPREDICT t=2.5 mesh=fine" >> "$HPCPREDICT_FEATURES_FILE"'
echo "not a feature line" >> "$HPCPREDICT_FEATURES_FILE"
"""

SYMLINK_SCRIPT = """#!/bin/bash
#SBATCH -N 1
#SBATCH -J features-link
rm -f "$HPCPREDICT_FEATURES_FILE"
ln -s {target} "$HPCPREDICT_FEATURES_FILE"
"""

SILENT_SCRIPT = """#!/bin/bash
#SBATCH -N 1
#SBATCH -J features-none
test -f "$HPCPREDICT_FEATURES_FILE" && echo "made=$HPCPREDICT_FEATURES_FILE"
"""

OVERSIZED_SCRIPT = """#!/bin/bash
#SBATCH -N 1
#SBATCH -J features-big
seq 1 5000 | sed 's/.*/HPCPREDICT t=& filler=&/' >> "$HPCPREDICT_FEATURES_FILE"
head -c 3000000 /dev/zero | tr '\\0' x >> "$HPCPREDICT_FEATURES_FILE"
echo >> "$HPCPREDICT_FEATURES_FILE"
echo "HPCPREDICT t=9 last=1" >> "$HPCPREDICT_FEATURES_FILE"
"""


def user_dir(cluster, user: str) -> str:
    """A fresh directory owned by ``user`` (mode 0755) under the cluster's jobs directory."""
    path = cluster.jobs / f"{user}-features-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    path.chmod(0o755)
    return str(path)


def submit(cluster, user: str, directory: str, script: str) -> str:
    name = os.path.join(directory, "job.sh")
    with open(name, "w") as handle:
        handle.write(script)
    os.chmod(name, 0o755)
    job_id, _, _, _ = cluster.sbatch(user, "-D", directory, "-o", "out-%j.txt", "-t", "5", name)
    return job_id


def outcome_row(daemon, job_id: str):
    db = sqlite3.connect(str(daemon.data_dir / "hpcpredict.sqlite"))
    try:
        rows = db.execute("SELECT inputs, prediction_id, state FROM jobs WHERE job_id = ? AND source = 'outcome'",
                          (job_id,)).fetchall()
    finally:
        db.close()
    return (json.loads(rows[0][0]), rows[0][1], rows[0][2]) if rows else None


def stages_of(daemon, job_id: str) -> list[str]:
    db = sqlite3.connect(str(daemon.data_dir / "hpcpredict.sqlite"))
    try:
        return [row[0] for row in db.execute("SELECT stage FROM predictions WHERE job_id = ? ORDER BY created",
                                             (job_id,))]
    finally:
        db.close()


def test_features_a_job_reports_are_stored_with_its_outcome(cluster, daemon):
    directory = user_dir(cluster, "alice")
    job_id = submit(cluster, "alice", directory, FEATURES_SCRIPT)
    cluster.wait_done(job_id)
    features_file = os.path.join(directory, f".hpcpredict-features-{job_id}")
    output = open(os.path.join(directory, f"out-{job_id}.txt")).read()
    assert f"file={features_file} t0=" in output, output

    inputs, linked, state = poll(lambda: outcome_row(daemon, job_id), 120, f"the outcome of job {job_id}", 1.0)
    assert state == "COMPLETED"
    # the values (the step's line too) and when each was reported, as run tables name them
    assert inputs["iterations"] == 400.0 and inputs["solver"] == "cg" and inputs["mesh"] == "fine"
    assert inputs["iterations@t"] == 1.5 and inputs["mesh@t"] == 2.5
    assert "runtime-features" in stages_of(daemon, job_id)
    # the outcome stays linked to the prediction made before the job ran (accuracy is scored on it)
    db = sqlite3.connect(str(daemon.data_dir / "hpcpredict.sqlite"))
    try:
        stage = db.execute("SELECT stage FROM predictions WHERE prediction_id = ?", (linked,)).fetchone()
    finally:
        db.close()
    assert stage is not None and stage[0] in ("allocation", "submit")
    assert not os.path.exists(features_file)     # removed once relayed
    assert f"epilog_slurmctld job {job_id}: runtime features relayed (3 lines)" in cluster.hooks_log()


def test_a_job_that_reports_nothing_leaves_no_file_behind(cluster, daemon):
    """Most jobs never report: the TaskEpilog (as the user: SlurmUser may not remove a file from
    the user's directory) takes away the empty file the TaskProlog made, working out its name
    from the directory slurmstepd runs it in (the job's working directory)."""
    directory = user_dir(cluster, "alice")
    job_id = submit(cluster, "alice", directory, SILENT_SCRIPT)
    cluster.wait_done(job_id)
    features_file = os.path.join(directory, f".hpcpredict-features-{job_id}")
    output = open(os.path.join(directory, f"out-{job_id}.txt")).read()
    assert f"made={features_file}" in output, output          # it was there while the job ran
    poll(lambda: not os.path.exists(features_file), 30, f"{features_file} removed", 0.5)
    assert sorted(os.listdir(directory)) == ["job.sh", f"out-{job_id}.txt"]


def test_a_planted_link_to_a_root_only_file_relays_nothing(cluster, daemon, tmp_path):
    secret = tmp_path / "root-only"
    secret.write_text("HPCPREDICT t=1 secret=4242\n")
    secret.chmod(0o600)
    directory = user_dir(cluster, "bob")
    job_id = submit(cluster, "bob", directory, SYMLINK_SCRIPT.format(target=secret))
    cluster.wait_done(job_id)

    inputs, _, state = poll(lambda: outcome_row(daemon, job_id), 120, f"the outcome of job {job_id}", 1.0)
    assert state == "COMPLETED"                  # the outcome is recorded all the same
    assert "secret" not in inputs
    assert "runtime-features" not in stages_of(daemon, job_id)
    log = cluster.hooks_log()
    assert f"epilog_slurmctld job {job_id}: runtime features not read: " in log
    assert "is a symbolic link" in log and "4242" not in log
    assert secret.read_text() == "HPCPREDICT t=1 secret=4242\n"           # not removed
    assert os.path.islink(os.path.join(directory, f".hpcpredict-features-{job_id}"))


def test_an_oversized_features_file_is_read_only_up_to_the_limits(cluster, daemon):
    directory = user_dir(cluster, "carol")
    job_id = submit(cluster, "carol", directory, OVERSIZED_SCRIPT)
    cluster.wait_done(job_id)

    inputs, _, _ = poll(lambda: outcome_row(daemon, job_id), 120, f"the outcome of job {job_id}", 1.0)
    # features_max_lines (1000 by default): the 1000th line is the last one relayed
    assert inputs["filler"] == 1000.0 and inputs["filler@t"] == 1000.0
    assert "last" not in inputs
    assert f"epilog_slurmctld job {job_id}: runtime features: only the first 1000 lines" in cluster.hooks_log()


def test_features_can_be_switched_off(cluster, daemon):
    cluster.set_hook_setting("features_enabled", "false")
    try:
        directory = user_dir(cluster, "alice")
        job_id = submit(cluster, "alice", directory, FEATURES_SCRIPT)
        cluster.wait_done(job_id)
        output = open(os.path.join(directory, f"out-{job_id}.txt")).read()
    finally:
        cluster.set_hook_setting("features_enabled", "true")
    assert "file= t0=" in output                 # nothing exported
    inputs, _, _ = poll(lambda: outcome_row(daemon, job_id), 120, f"the outcome of job {job_id}", 1.0)
    assert "iterations" not in inputs
