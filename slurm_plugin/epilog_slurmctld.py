#!/usr/bin/python3 -sE
"""EpilogSlurmctld: report the job's outcome (elapsed, final state, exit code) to the daemon.

Runs on the controller as SlurmUser when a job ends. What slurmctld shows at this moment is
incomplete (the state reads COMPLETING; a job cancelled while running looks completed), so
the script takes a snapshot with ``scontrol show job`` right away, returns at once, and a
detached child waits up to ``outcome_wait_s`` for ``sacct --json`` to have the final record
(accounting arrives asynchronously), then calls ReportOutcome over the hook socket with
sacct's state when it came, the snapshot's otherwise. ``outcome_wait_s = 0`` reports the
snapshot immediately (sites without slurmdbd). While the daemon cannot be reached (a restart)
the child retries for ``outcome_retry_s``. ``hpcpredict refresh`` later re-reads
accounting anyway, so a missed report only delays learning. Always exits 0.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import hookclient  # noqa: E402
import slurmjob  # noqa: E402

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


def report(settings: dict, outcome: dict, wait_s: float) -> None:
    source = "scontrol snapshot"
    if wait_s > 0:
        final = final_from_sacct(settings, outcome["job_id"], wait_s)
        if final is not None:
            state, elapsed, exit_code, start, end = final
            outcome.update(state=state, elapsed_s=elapsed, exit_code=exit_code or outcome["exit_code"])
            if start and end:
                outcome.update(start_time=start, end_time=end)
            source = "sacct"
    # The daemon may be restarting right now: keep trying for outcome_retry_s, an outcome is
    # worth more than a prediction.
    deadline = time.monotonic() + float(settings["outcome_retry_s"])
    pause = 1.0
    while True:
        try:
            ack = hookclient.call("ReportOutcome", outcome, socket_path=settings["hook_socket"],
                                  timeout=float(settings["prolog_budget_s"]))
            break
        except hookclient.HookError as error:
            if wait_s <= 0 or time.monotonic() + pause > deadline or isinstance(error, hookclient.HookRefused):
                raise
            hookclient.log(settings, HOOK, f"retrying in {pause:.0f} s: {error}")
            time.sleep(pause)
            pause = min(pause * 2, 15.0)
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
        text = hookclient.run_command(["scontrol", "show", "job", job_id], settings).decode("utf-8", "replace")
        outcome = slurmjob.outcome_from_snapshot(slurmjob.parse_scontrol_job(text),
                                                 os.environ.get("SLURM_JOB_EXIT_CODE2", ""))
        outcome["node_list"] = outcome["node_list"] or os.environ.get("SLURM_JOB_NODELIST", "")
        if not outcome["start_time"]:
            hookclient.log(settings, HOOK, "job never started: no outcome to learn from")
            return 0
    except Exception as error:  # never fail slurmctld's epilog because of the predictor
        hookclient.log(settings, HOOK, f"no outcome: {type(error).__name__}: {error}")
        return 0
    wait_s = float(settings["outcome_wait_s"])
    if wait_s > 0 and not detach():
        return 0
    try:
        report(settings, outcome, wait_s)
    except Exception as error:
        hookclient.log(settings, HOOK, f"outcome not reported: {type(error).__name__}: {error}")
    if wait_s > 0:
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
