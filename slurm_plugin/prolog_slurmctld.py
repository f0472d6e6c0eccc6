#!/usr/bin/python3 -sE
"""PrologSlurmctld: refine the estimate once Slurm has chosen the nodes (class C features).

Runs on the controller as SlurmUser when a job is allocated, with the job's identity in its
environment (SLURM_JOB_ID, SLURM_JOB_UID, SLURM_JOB_USER, SLURM_JOB_NODELIST...) but no PATH
and no SLURM_CONF (``hpcpredict-hooks.conf`` names them). It reads the job
(``slurmjob.read_job``: never from text the user wrote; ``scontrol write batch_script``), calls
PredictAtAllocation over the daemon's local socket (the daemon stores the refined estimate with
the job id, which also links the outcome when AdminComment lost our field), and writes the
suggestion for the job's output into our field of AdminComment (``{hpcpredict=...}``; the rest
of AdminComment is kept), where the TaskProlog reads it.

It also sends what slurmctld holds now, for the daemon to store beside what it decided at
submission: the job's TimeLimit (the limit it starts under: on a time_min job backfill may have
lowered the submitted --time) and its TimeMin (what the hook or the user set). With
``prolog_adjust_time_limit = true`` and a TimeLimit job_submit.lua set itself (``;limit=auto``:
the user gave none) it asks the daemon whether to lower that limit (``lower_time_limit``); the
daemon decides (``apply_time_limit_s``, daemon/policy/allocation.py) and this script only guards
(a whole number of minutes, below the job's limit, at most ``max_time_limit_s``) and applies it.
An estimate that is not sane (runtime or bound not finite, <= 0 or above ``max_time_limit_s``)
changes nothing and writes no suggestion. Always exits 0: a prediction problem must never
requeue or kill a job.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

import hookclient  # noqa: E402
import slurmjob  # noqa: E402

HOOK = "prolog_slurmctld"


def refine(settings: dict, job_id: str, node_list: str) -> str:
    job = slurmjob.with_environment(slurmjob.read_job(hookclient.slurm_runner(settings), job_id), os.environ)
    try:
        script = hookclient.run_command(["scontrol", "write", "batch_script", job_id, "-"], settings)
    except hookclient.HookError:
        script = b""                        # salloc/srun allocations have no script
    comment = job.admin_comment
    field = slurmjob.our_field(comment)
    automatic = ";limit=auto" in field
    time_min_ours = ";time_min=auto" in field     # a kill limit (bound mode)
    time_min_soft = ";time_min=soft" in field     # time_min_as_soft_limit: planned with, never enforced
    request = slurmjob.job_request(job, script)
    # The job's TimeLimit is the user's --time only when the user gave one: without, it is the
    # partition's (";time=none" from the hook), or unlimited, which running jobs show as 365
    # days; neither is a request to predict from or to quote back to the user.
    given = slurmjob.user_time_limit(job.time_limit_s, field)
    requested_s = 0 if automatic else given
    if automatic or not given:
        request["time_limit_s"] = 0
    submit_id = slurmjob.prediction_id(comment)
    lower = automatic and hookclient.flag(settings["prolog_adjust_time_limit"])
    allocation = {"request": request, "node_list": node_list, "job_id": job_id, "prediction_id": submit_id,
                  "job_time_limit_s": job.time_limit_s, "job_time_min_s": job.time_min_s, "lower_time_limit": lower}
    estimate = hookclient.call("PredictAtAllocation", allocation, socket_path=settings["hook_socket"],
                               timeout=float(settings["prolog_budget_s"]))
    cap_s = float(settings["max_time_limit_s"])
    insane = slurmjob.insane_estimate(estimate, cap_s)
    if insane:
        return f"{insane}: job and AdminComment unchanged, nothing printed"
    time_min_s = job.time_min_s if time_min_ours else 0
    lines = slurmjob.suggestion_lines(estimate, requested_s, node_list, time_min_s=time_min_s,
                                      chosen_by_us=automatic)
    soft_min_s = job.time_min_s if time_min_soft else 0
    if soft_min_s and requested_s:
        lines.insert(1, f"hpcpredict set --time-min={slurmjob.slurm_minutes(soft_min_s)} as a soft limit: the "
                        f"scheduler planned with it; the job is never stopped before its --time="
                        f"{slurmjob.slurm_minutes(requested_s)}")
    flags = (";limit=auto" if automatic else "") + (";time_min=auto" if time_min_ours else "") + \
        (";time_min=soft" if time_min_soft else "") + f";runtime_s={float(estimate['runtime_s']):.0f}"
    new_field = slurmjob.admin_field(submit_id, str(estimate.get("prediction_id", "")), lines, flags=flags)
    update = ["scontrol", "update", f"jobid={job_id}", f"AdminComment={slurmjob.with_our_field(comment, new_field)}"]
    lowered = slurmjob.allocation_time_limit(estimate, job.time_limit_s, cap_s) if lower else ""
    if lowered:
        update.append(f"TimeLimit={lowered}")
    hookclient.run_command(update, settings)
    return (f"refined on {node_list}: runtime {float(estimate.get('runtime_s', 0)):.0f} s, "
            f"id {estimate.get('prediction_id', '')}; started under TimeLimit {job.time_limit_s} s, "
            f"TimeMin {job.time_min_s} s" + (f"; TimeLimit lowered to {lowered} min" if lowered else ""))


def main() -> int:
    settings = hookclient.load_settings()
    job_id, node_list = os.environ.get("SLURM_JOB_ID", ""), os.environ.get("SLURM_JOB_NODELIST", "")
    if not job_id:
        hookclient.log(settings, HOOK, "no SLURM_JOB_ID: not run by slurmctld?")
        return 0
    if not hookclient.flag(settings["enabled"]):    # the off switch: no call, no AdminComment change
        return 0
    started = time.monotonic()
    try:
        hookclient.log(settings, HOOK, f"{refine(settings, job_id, node_list)} ({(time.monotonic() - started) * 1e3:.0f} ms)")
    except hookclient.HookError as error:
        hookclient.log(settings, HOOK, f"no refined estimate: {error}")
    except Exception as error:  # never fail a job because of the predictor
        hookclient.log(settings, HOOK, f"no refined estimate (bug): {type(error).__name__}: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
