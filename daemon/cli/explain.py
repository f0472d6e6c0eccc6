"""`hpcpredict explain JOBID`: what was predicted for one job, why, what was decided, what was
applied and what the job ran under, how it ended.

Decided (what the daemon answered the hooks) and what happened (what PrologSlurmctld read back
from slurmctld at allocation) are shown apart (:mod:`.job_limits`): on 22.05 a "soft"
``--time-min`` is a kill limit, and backfill starts the job under it.

Who may read what: root or the store file's owner (the daemon's user) reads the store file
directly, every job; anyone else asks the daemon (``JobRecord``: the local socket, where the
kernel names the caller, or the remote listener with MUNGE), which answers a user's own jobs
only and refuses another user's (:mod:`hpcpredict.daemon.job_records`). The lines and the
``--json`` keys are the same either way.
"""
from __future__ import annotations

from dataclasses import dataclass, field


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "explain", help="what was predicted for a job and why, what was set, how it ended (your own jobs; admins: any)",
        description="Look a job up in the store: its predictions at submission and at allocation (model and "
                    "version, inputs, the user's history then, the limits the policy sets for that answer), "
                    "how the job ended and the prediction's error. An admin on the controller reads the store file; "
                    "anyone else asks the daemon, which answers about the caller's own jobs.")
    parser.add_argument("job_id", metavar="JOBID")
    parser.add_argument("-M", "--cluster", default=None, help="the cluster the job ran on (sacct -M)")
    parser.add_argument("--history", type=int, default=5, help="past jobs of the user to show (default 5)")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=_explain)


@dataclass
class Explanation:
    job_id: str
    job: dict | None                      # the ended job (outcome row first), None if not ended/known
    predictions: list[dict] = field(default_factory=list)
    history: list[dict] = field(default_factory=list)
    limits: dict = field(default_factory=dict)   # decided vs applied vs ran under (:func:`job_limits_of`)


def _request_summary(request: bytes) -> dict:
    """The inputs a prediction was made from (the stored JobRequest, without the script)."""
    if not request:
        return {}
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import DecodeError

    from ...proto.v1 import hpcpredict_pb2 as pb

    message = pb.JobRequest()
    try:
        message.ParseFromString(request)
    except DecodeError:
        return {"undecodable": True}
    data = MessageToDict(message, preserving_proto_field_name=True)
    data.pop("script", None)
    data.pop("environment", None)
    return data


def explain_job(store, job_id: str, *, history: int = 5, cluster: str | None = None) -> Explanation:
    """Everything the store knows about ``job_id`` (plain data, JSON-ready). The limits shown
    are the ones the daemon decided for the submission hook, as stored with the prediction."""
    from ..job_records import read_job_record

    return explanation_of(read_job_record(store, job_id, cluster=cluster, history=history), job_id)


def explanation_of(data, job_id: str) -> Explanation:
    """The explanation of one job's stored record (:class:`~hpcpredict.daemon.job_records.JobRecordData`,
    read from the store or answered by the daemon)."""
    rows, predictions = data.rows, data.predictions
    ended = next((row for row in rows if row["source"] == "outcome"), rows[0] if rows else None)
    result = Explanation(job_id=str(job_id), job=ended)
    for row in predictions:
        entry = {"prediction_id": row.prediction_id, "stage": row.stage, "created": row.created,
                 "model": row.model_name, "model_version": row.model_version, "fallback": row.fallback,
                 "runtime_s": row.runtime_s, "low_s": row.low_s, "high_s": row.high_s, "bound_s": row.bound_s,
                 "requested_time_s": row.requested_time_s, "comm_time_s": row.comm_time_s,
                 # set_*: the keys before decided_* existed (the same values: what was decided)
                 "set_time_limit_s": row.decided_time_limit_s, "set_time_min_s": row.decided_time_min_s,
                 "decided_time_limit_s": row.decided_time_limit_s, "decided_time_min_s": row.decided_time_min_s,
                 "started_time_limit_s": row.started_time_limit_s, "started_time_min_s": row.started_time_min_s,
                 "policy_mode": row.policy_mode, "policy": row.policy_reason,
                 # the --time this answer suggested (the sbatch line's, the job output's); None: not stored
                 "suggested_time_limit_s": row.suggested_time_limit_s, "inputs": _request_summary(row.request)}
        if ended is not None and ended["runtime_s"] > 0 and row.runtime_s > 0:
            actual = ended["runtime_s"]
            entry["error"] = {"predicted_over_actual": row.runtime_s / actual,
                              "accuracy": min(row.runtime_s, actual) / max(row.runtime_s, actual),
                              "outlived_bound": actual > row.bound_s}
        result.predictions.append(entry)
    result.limits = job_limits_of(ended, result.predictions)
    result.history = [{"job_id": j.job_id, "application": j.application, "requested_time_s": j.requested_time_s,
                       "runtime_s": j.runtime_s, "state": j.state, "end_time": j.end_time} for j in data.history]
    return result


def job_limits_of(ended: dict | None, predictions: list[dict]) -> dict:
    """The job's limits, decided apart from what happened (:mod:`.job_limits`): the user's
    request; what the daemon decided at submission (the latest submission prediction) and at
    allocation; the TimeMin slurmctld held at allocation (applied) and the TimeLimit the job
    started under; whether Slurm lowered the limit at start; the limit it ran under; and, once
    it ended, whether our limit killed it."""
    from . import job_limits

    submit = next((p for p in reversed(predictions) if p["stage"] == "submit"), None)
    allocation = next((p for p in reversed(predictions) if p["stage"] == "allocation"), None)
    requested = ended["requested_time_s"] if ended else (submit["requested_time_s"] if submit else 0.0)
    decided_min = submit["decided_time_min_s"] if submit else None
    decided_limit = submit["decided_time_limit_s"] if submit else None
    allocation_limit = allocation["decided_time_limit_s"] if allocation else None
    started_limit = allocation["started_time_limit_s"] if allocation else None
    # the job's --time as submitted: the user's, else the one the hook was to set
    submitted = requested if requested and requested > 0 else decided_limit
    ran = job_limits.ran_time_limit_s(started_limit, allocation_limit)
    limits = {"requested_time_s": requested or None, "policy_mode": submit["policy_mode"] if submit else "",
              "decided_time_min_s": decided_min, "decided_time_limit_s": decided_limit,
              "decided_at_allocation_time_limit_s": allocation_limit,
              "applied_time_min_s": allocation["started_time_min_s"] if allocation else None,
              "started_time_limit_s": started_limit,
              "lowered_at_start": job_limits.lowered_at_start(started_limit, submitted),
              "ran_time_limit_s": ran, "killed_by_our_limit": None}
    if ended is not None and ended["source"] == "outcome":
        decided = job_limits.ours(decided_time_min_s=decided_min, decided_time_limit_s=decided_limit,
                                  allocation_time_limit_s=allocation_limit,
                                  policy_mode=submit["policy_mode"] if submit else "",
                                  bound_s=submit["bound_s"] if submit else None, requested_s=requested,
                                  fallback=submit["fallback"] if submit else True)
        limits["killed_by_our_limit"] = job_limits.killed_by_our_limit(
            state=ended["state"], runtime_s=ended["runtime_s"], requested_s=requested, ours=decided, ran_limit_s=ran)
    return limits


def _limit_lines(limits: dict, state: str | None) -> list[str]:
    """The job's limits as a person reads them: decided, applied, ran under, apart."""
    from ..timefmt import slurm_time

    def shown(seconds) -> str:
        return slurm_time(int(seconds)) if seconds else "-"

    requested = shown(limits["requested_time_s"]) if limits["requested_time_s"] else "none"
    mode = f" [{limits['policy_mode']} mode]" if limits["policy_mode"] else ""
    decided = ", ".join(f"{name} {shown(limits[key])}" for name, key in (("--time-min", "decided_time_min_s"),
                                                                        ("--time", "decided_time_limit_s"))
                        if limits[key]) or "nothing"
    lines = ["Limits (decided by the daemon, then what slurmctld held):",
             f"  requested by the user: --time {requested}",
             f"  decided at submission: {decided}{mode}"]
    if limits["decided_at_allocation_time_limit_s"]:
        lines.append(f"  decided at allocation: TimeLimit {shown(limits['decided_at_allocation_time_limit_s'])} "
                     "(lowering the limit the hook set)")
    if limits["started_time_limit_s"] is None and limits["applied_time_min_s"] is None:
        lines.append("  applied / ran under: not read back (no allocation-time read of the job: an older "
                     "PrologSlurmctld, or the daemon was not reached at allocation)")
    else:
        lowered = {True: " (lowered at start: below the --time it was submitted with)",
                   False: " (as submitted)", None: ""}[limits["lowered_at_start"]]
        lines.append(f"  applied (slurmctld at allocation): TimeMin {shown(limits['applied_time_min_s'])}")
        lines.append(f"  started under: TimeLimit {shown(limits['started_time_limit_s'])}{lowered}")
        lines.append(f"  ran under: TimeLimit {shown(limits['ran_time_limit_s'])}")
    if limits["killed_by_our_limit"] is not None and state == "TIMEOUT":
        lines.append("  TIMEOUT " + ("below the user's --time, under a limit we decided: killed by our limit"
                                     if limits["killed_by_our_limit"] else "at the user's own limit, not ours"))
    return lines


def explanation_lines(result: Explanation) -> list[str]:
    """The explanation as a person reads it."""
    from datetime import datetime, timezone

    from ..policy import limits_meaning
    from ..timefmt import human, slurm_time

    def when(stamp: float) -> str:
        return datetime.fromtimestamp(stamp, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if stamp > 0 else "?"

    job = result.job
    lines = [f"Job {result.job_id}"]
    if job is not None:
        requested = slurm_time(int(job["requested_time_s"])) if job["requested_time_s"] > 0 else "none"
        lines.append(f"  user {job['user']}  account {job['account'] or '-'}  partition {job['partition'] or '-'}  "
                     f"application {job['application'] or '-'}  ({job['source']})")
        lines.append(f"  submitted {when(job['submit_time'])}, requested {requested}, "
                     f"{job['nodes'] or '?'} nodes / {job['requested_procs'] or job['allocated_procs'] or '?'} procs")
        lines.append(f"  ended {when(job['end_time'])}: {job['state']} after {human(job['runtime_s'])}")
    else:
        lines.append("  not ended yet (no outcome or history row)")
    if not result.predictions:
        lines.append("No prediction recorded for this job (history ingested from accounting, or the daemon "
                     "was not asked).")
    for entry in result.predictions:
        lines.append(f"Prediction at {entry['stage']} ({when(entry['created'])}, id {entry['prediction_id']})")
        model = f"{entry['model']} {entry['model_version']}".strip()
        lines.append(f"  model {model}{' (fallback)' if entry['fallback'] else ''}: runtime "
                     f"{human(entry['runtime_s'])} ({human(entry['low_s'])}-{human(entry['high_s'])}), "
                     f"bound {human(entry['bound_s'])}")
        if entry["suggested_time_limit_s"]:
            said = {"submit": " (as the sbatch line said)", "allocation": " (as the job output said)"}
            lines.append(f"  suggested --time={slurm_time(entry['suggested_time_limit_s'])}{said.get(entry['stage'], '')}")
        inputs = entry["inputs"]
        shown = {k: inputs[k] for k in ("inputs", "resources", "time_limit_s", "comm", "node_list") if k in inputs}
        if shown:
            lines.append(f"  inputs: {shown}")
        mode = f" [{entry['policy_mode']} mode]" if entry["policy_mode"] else ""
        # what the decided limit does, in the decision's own words (daemon/policy)
        meaning = limits_meaning(entry["policy_mode"], time_limit_s=entry["decided_time_limit_s"],
                                 time_min_s=entry["decided_time_min_s"])
        meaning = f" ({meaning})" if meaning else ""
        if entry["decided_time_limit_s"]:
            what = "TimeLimit" if entry["stage"] == "allocation" else "--time"
            lines.append(f"  decided: {what} {slurm_time(entry['decided_time_limit_s'])}{meaning}{mode}")
        elif entry["decided_time_min_s"]:
            lines.append(f"  decided: --time-min {slurm_time(entry['decided_time_min_s'])}{meaning}{mode}")
        elif entry["policy"] and entry["stage"] == "submit":
            lines.append(f"  decided: nothing ({entry['policy'].replace('_', ' ')}){mode}")
        elif entry["stage"] == "submit":
            lines.append("  decided: not recorded (a prediction stored before the daemon decided the limits)")
        if entry["started_time_limit_s"] is not None or entry["started_time_min_s"] is not None:
            limit, time_min = (slurm_time(int(entry[key])) if entry[key] else "-"
                               for key in ("started_time_limit_s", "started_time_min_s"))
            lines.append(f"  slurmctld at allocation: TimeLimit {limit}, TimeMin {time_min}")
        error = entry.get("error")
        if error:
            lines.append(f"  error: predicted/actual {error['predicted_over_actual']:.2f}, accuracy "
                         f"{error['accuracy']:.2f}" + (", the job outlived the bound" if error["outlived_bound"] else ""))
    if result.predictions:
        lines.extend(_limit_lines(result.limits, job["state"] if job is not None else None))
    if result.history:
        lines.append(f"The user's last {len(result.history)} jobs before it:")
        for past in result.history:
            requested = slurm_time(int(past["requested_time_s"])) if past["requested_time_s"] > 0 else "none"
            lines.append(f"  {past['job_id']:>12}  {past['application'] or '-':12.12}  requested {requested:>11}  "
                         f"ran {human(past['runtime_s']):>8}  {past['state']}")
    return lines


def _explain(args) -> int:
    from dataclasses import asdict

    from . import records_source
    from .common import config_of, print_json, print_lines

    config = config_of(args)
    if records_source.store_is_mine(config):
        from ..store import open_store

        store = open_store(config)
        try:
            result = explain_job(store, args.job_id, history=args.history, cluster=args.cluster)
        finally:
            store.close()
    else:
        result = explanation_of(records_source.job_record(config, args.job_id, history=args.history,
                                                          cluster=args.cluster, socket=getattr(args, "socket", None)),
                                args.job_id)
    if args.json:
        print_json(asdict(result))
    else:
        print_lines(explanation_lines(result))   # the job's fields are the user's text
    return 0
