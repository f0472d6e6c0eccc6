#!/usr/bin/python3 -sE
"""EpilogSlurmctld: report the job's outcome (elapsed, final state, exit code) to the daemon.

Runs on the controller as SlurmUser when a job ends, with the job's identity in its
environment (SLURM_JOB_ID, SLURM_JOB_UID, SLURM_JOB_USER, SLURM_JOB_EXIT_CODE2...). What
slurmctld shows at this moment is incomplete (the state reads COMPLETING; a job cancelled while
running looks completed), so the script takes a snapshot right away (``slurmjob.read_job``:
never from text the user wrote), returns at once, and a
detached child waits up to ``outcome_wait_s`` for ``sacct --json`` to have the final record
(accounting arrives asynchronously), then calls ReportOutcome over the local socket with
sacct's state when it came, the snapshot's otherwise. ``outcome_wait_s = 0`` reports the
snapshot immediately (sites without slurmdbd). While the daemon cannot be reached (a restart)
the child retries for ``outcome_retry_s``. ``hpcpredict refresh`` later re-reads
accounting anyway, so a missed report only delays learning.

Runtime features: the job's features file (``features_file``; the TaskProlog exported its name
as ``HPCPREDICT_FEATURES_FILE``) is read (by the detached child), bounded and without following links
(``features_file.take``), removed, and its raw text sent with ReportRuntimeFeatures just before
the outcome; the daemon parses it and stores the values with the job's history. A file that
is refused or unreadable is logged (the reason, never its content) and the outcome is reported
as usual. Always exits 0.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import hookclient  # noqa: E402
import slurmjob  # noqa: E402

try:   # a hooks directory installed before features_file.py existed: no runtime features, the rest works
    import features_file  # noqa: E402
except ImportError:
    features_file = None

HOOK = "epilog_slurmctld"


def final_from_sacct(settings: dict, job_id: str, wait_s: float):
    """Poll ``sacct --json -j ID`` until the job is final or ``wait_s`` passes."""
    deadline = time.monotonic() + wait_s
    pause = 0.5
    problem = ""
    while True:
        try:
            data = json.loads(hookclient.run_command(["sacct", "--json", "-a", "-j", job_id], settings, timeout=10))
            for job in data.get("jobs", ()):
                if str(job.get("job_id")) == job_id:
                    final = slurmjob.sacct_final(job)
                    if final is not None:
                        return final
        except (hookclient.HookError, ValueError) as error:
            problem = str(error)
        if time.monotonic() + pause > deadline:
            if problem:  # once, not once per poll (a site without slurmdbd sees this every job)
                hookclient.log(settings, HOOK, f"no final state from sacct ({problem}); using scontrol's view")
            return None
        time.sleep(pause)
        pause = min(pause * 1.5, 5.0)


def call_retrying(settings: dict, method: str, request: dict, wait_s: float) -> dict:
    """One hook call; while the daemon cannot be reached (a restart) keep trying for
    ``outcome_retry_s`` when the epilog runs detached (``wait_s`` > 0)."""
    deadline = time.monotonic() + float(settings["outcome_retry_s"])
    pause = 1.0
    while True:
        try:
            return hookclient.call(method, request, socket_path=settings["hook_socket"],
                                   timeout=float(settings["prolog_budget_s"]))
        except hookclient.HookError as error:
            if wait_s <= 0 or time.monotonic() + pause > deadline or isinstance(error, hookclient.HookRefused):
                raise
            hookclient.log(settings, HOOK, f"retrying {method} in {pause:.0f} s: {error}")
            time.sleep(pause)
            pause = min(pause * 2, 15.0)


def read_features(settings: dict, job):
    """The job's runtime-features text (``features_file.FeaturesText``) or None; never raises."""
    if features_file is None or not hookclient.flag(settings["features_enabled"]):
        return None
    path = features_file.features_path(settings, job.job_id, job.work_dir)
    uid = job.uid
    if not path or uid is None:
        return None
    shown = features_file.printable(path)   # the working directory is the user's choice
    try:
        found = features_file.take(path, uid, max_bytes=int(settings["features_max_bytes"]),
                                   max_lines=int(settings["features_max_lines"]))
    except features_file.FeaturesFileRefused as refused:
        hookclient.log(settings, HOOK, f"runtime features not read: {shown} {refused}")
        return None
    except (OSError, ValueError) as error:
        hookclient.log(settings, HOOK, f"runtime features not read: {shown}: {type(error).__name__}: "
                                       f"{getattr(error, 'strerror', None) or error}")
        return None
    if found is not None and found.truncated:
        hookclient.log(settings, HOOK, f"runtime features: only the first {found.lines} lines "
                                       f"({len(found.text.encode())} bytes) of {shown} relayed")
    return found if found is not None and found.text.strip() else None


def report_features(settings: dict, outcome: dict, features, wait_s: float) -> None:
    request = {"job_id": outcome["job_id"], "prediction_id": outcome["prediction_id"], "text": features.text}
    try:
        estimate = call_retrying(settings, "ReportRuntimeFeatures", request, wait_s)
    except hookclient.HookError as error:
        hookclient.log(settings, HOOK, f"runtime features ({features.lines} lines) not relayed: {error}")
        return
    hookclient.log(settings, HOOK, f"runtime features relayed ({features.lines} lines): "
                                   f"prediction {estimate.get('prediction_id', '')}")


def report(settings: dict, outcome: dict, wait_s: float, features=None) -> None:
    source = "scontrol snapshot"
    if wait_s > 0:
        final = final_from_sacct(settings, outcome["job_id"], wait_s)
        if final is not None:
            state, elapsed, exit_code, start, end = final
            outcome.update(state=state, elapsed_s=elapsed, exit_code=exit_code or outcome["exit_code"])
            if start and end:
                outcome.update(start_time=start, end_time=end)
            source = "sacct"
    if features is not None:   # before the outcome: the daemon adds them to the job's history
        report_features(settings, outcome, features, wait_s)
    # An outcome is worth more than a prediction: retried while the daemon restarts.
    ack = call_retrying(settings, "ReportOutcome", outcome, wait_s)
    hookclient.log(settings, HOOK, f"outcome {outcome['state']} elapsed {outcome['elapsed_s']:.0f} s "
                   f"(from {source}) stored={ack.get('stored')} duplicate={ack.get('duplicate')}")


def detach() -> bool:
    """Double fork; True in the detached grandchild, False in the original process."""
    if os.fork() != 0:
        return False
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):           # slurmctld must not wait on our pipes
        os.dup2(devnull, fd)
    return True


def main() -> int:
    settings = hookclient.load_settings()
    job_id = os.environ.get("SLURM_JOB_ID", "")
    if not job_id:
        return 0
    try:
        job = slurmjob.with_environment(slurmjob.read_job(hookclient.slurm_runner(settings), job_id), os.environ)
        outcome = slurmjob.outcome_from_snapshot(job, os.environ.get("SLURM_JOB_EXIT_CODE2", ""))
        if not outcome["start_time"]:
            hookclient.log(settings, HOOK, "job never started: no outcome to learn from")
            return 0
    except Exception as error:  # never fail slurmctld's epilog because of the predictor
        hookclient.log(settings, HOOK, f"no outcome: {type(error).__name__}: {error}")
        return 0
    wait_s = float(settings["outcome_wait_s"])
    if wait_s > 0 and not detach():
        return 0
    try:   # after detaching: a slow shared file system must not hold slurmctld's epilog
        features = read_features(settings, job)
    except Exception as error:
        hookclient.log(settings, HOOK, f"runtime features not read (bug): {type(error).__name__}: {error}")
        features = None
    try:
        report(settings, outcome, wait_s, features)
    except Exception as error:
        hookclient.log(settings, HOOK, f"outcome not reported: {type(error).__name__}: {error}")
    if wait_s > 0:
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
