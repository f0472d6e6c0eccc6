"""Pure helpers of the Slurm hook scripts: read a job as Slurm gives it, build hook requests.

Standard library only (the hook scripts run under the system Python). The scripts run the
commands (``hookclient.run_command``, passed to :func:`read_job`); everything else is pure.

A job is read from a source no user can write into. ``scontrol show job`` text is not one:
JobName, Comment, WorkDir, StdOut... are the user's and may hold spaces, ``=``, braces and
newlines, so a job named ``x AdminComment={hpcpredict=<id>}`` reads as another AdminComment.
:func:`read_job` therefore takes

* ``scontrol show job --json ID`` where the release has it (24.11): JSON, every field apart;
* else (22.05, whose ``squeue --json`` ignores ``-j`` and dumps every job) ``squeue -j ID
  --Format`` with only fields slurmctld itself writes (numbers, states, times, names an admin
  made) joined by ``|``, and AdminComment (admins only) last, so it is the rest of the line;
  the working directory (the user's text), when asked for, by a call of its own.

The hooks slurmctld runs (PrologSlurmctld, EpilogSlurmctld) take the job's identity from the
environment slurmctld gives them (:func:`with_environment`: SLURM_JOB_UID, SLURM_JOB_USER...).

Example::

    >>> line = ("7|COMPLETING|TimeLimit|00:01:00|0:00|1795765517|1795765519|1795765581|1:02|2|8|1|0|"
    ...         "normal|0||research|debug|alice|1001|alice|{hpcpredict=p-1}\\n")
    >>> job = job_from_squeue(line, "7")
    >>> job.user, job.admin_comment, job.time_limit_s, snapshot_state(job, "0:0")
    ('alice', '{hpcpredict=p-1}', 60, 'TIMEOUT')
"""
from __future__ import annotations

import json
import math
import re
import time
from dataclasses import dataclass, replace

ADVICE_SEPARATOR = " | "
ADMIN_PREFIX = "hpcpredict="


@dataclass(frozen=True)
class Job:
    """One job as slurmctld knows it (times: Unix seconds, 0 = not set; limits: seconds, 0 = none)."""
    job_id: str
    user: str = ""
    uid: int | None = None
    group: str = ""
    account: str = ""
    partition: str = ""
    qos: str = ""
    job_name: str = ""
    state: str = ""
    reason: str = ""
    time_limit_s: int = 0
    time_min_s: int = 0
    submit_time: int = 0
    start_time: int = 0
    end_time: int = 0
    run_time_s: int = 0
    nodes: int = 0
    ntasks: int = 0
    ntasks_per_node: int = 0
    cpus_per_task: int = 1
    node_list: str = ""
    exit_code: int = 0          # the batch script's exit status
    exit_signal: int = 0        # the signal that ended it (0: none)
    admin_comment: str = ""
    work_dir: str = ""


# squeue --Format fields (22.05 names), each ":0" (never cut) and "|"-terminated; none of them
# holds text a user wrote. AdminComment comes last: whatever follows the last "|" is it.
SQUEUE_FIELDS = ("JobID", "State", "Reason", "TimeLimit", "MinTime", "SubmitTime", "StartTime", "EndTime",
                 "TimeUsed", "NumNodes", "NumTasks", "cpus-per-task", "NTPerNode", "QOS", "exit_code", "NodeList",
                 "Account", "Partition", "UserName", "UserID", "GroupName")
SQUEUE_FORMAT = ",".join(f"{field}:0|" for field in SQUEUE_FIELDS) + ",admin_comment:0"
#: squeue prints times as Unix seconds under this
SQUEUE_ENVIRONMENT = {"SLURM_TIME_FORMAT": "%s"}


def _epoch(text: str) -> int:
    text = (text or "").strip()
    return int(text) if text.isdigit() else 0


def _duration(text: str) -> int:
    try:
        return slurm_duration_s(text)
    except ValueError:          # "INVALID", "NOT_SET"...
        return 0


#: Where a record of SQUEUE_FORMAT starts: its JobID and State (AdminComment, the rest of a
#: record, may hold newlines, but only an admin writes it)
_SQUEUE_RECORD = re.compile(r"^(\d+)\|[A-Z_]+\|", re.M)


def job_from_squeue(text: str, job_id: str) -> Job:
    """The record of job ``job_id`` in ``squeue -h -j ID --Format=SQUEUE_FORMAT`` (under
    SQUEUE_ENVIRONMENT); ValueError when there is none. ``-j`` of a job array's first task (its
    id is the array's) lists every task of the array, one record each: the one whose JobID is
    ``job_id`` is taken."""
    starts = [(match.start(), match.group(1)) for match in _SQUEUE_RECORD.finditer(text)]
    if len(starts) > 1:
        ends = [start for start, _ in starts[1:]] + [len(text)]
        mine = [text[start:end] for (start, record_id), end in zip(starts, ends) if record_id == job_id]
        if len(mine) == 1:
            text = mine[0]
    line = text[:-1] if text.endswith("\n") else text
    parts = line.split("|", len(SQUEUE_FIELDS))
    if len(parts) != len(SQUEUE_FIELDS) + 1:
        raise ValueError(f"squeue: {len(parts)} fields, not {len(SQUEUE_FIELDS) + 1}")
    value = dict(zip(SQUEUE_FIELDS, parts))
    if value["JobID"] != job_id:
        raise ValueError(f"squeue answered job {value['JobID']!r}, not {job_id!r}")
    status = _first_int(value["exit_code"])          # a wait(2) status
    uid = value["UserID"].strip()
    return Job(job_id=job_id, user=value["UserName"], uid=int(uid) if uid.isdigit() else None,
               group=value["GroupName"], account=value["Account"], partition=value["Partition"], qos=value["QOS"],
               state=value["State"], reason=value["Reason"], time_limit_s=_duration(value["TimeLimit"]),
               time_min_s=_duration(value["MinTime"]), submit_time=_epoch(value["SubmitTime"]),
               start_time=_epoch(value["StartTime"]), end_time=_epoch(value["EndTime"]),
               run_time_s=_duration(value["TimeUsed"]), nodes=_first_int(value["NumNodes"]),
               ntasks=_first_int(value["NumTasks"]), cpus_per_task=_first_int(value["cpus-per-task"], 1) or 1,
               ntasks_per_node=_first_int(value["NTPerNode"]), node_list=value["NodeList"],
               exit_code=(status >> 8) & 0xFF, exit_signal=status & 0x7F, admin_comment=parts[-1])


def _number(value) -> int:
    """A JSON number of Slurm's: plain (22.05) or {"set", "infinite", "number"} (23.02 on); 0 when
    unset or infinite."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return 0
        value = value.get("number", 0)
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


_BASE_STATES = ("PENDING", "RUNNING", "SUSPENDED", "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL",
                "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY")


def job_from_json(text: str | bytes, job_id: str) -> Job:
    """Job ``job_id`` of ``scontrol show job --json`` (24.11) or ``squeue --json`` (22.05, every
    job); ValueError when it is not there."""
    data = json.loads(text)
    jobs = data.get("jobs") if isinstance(data, dict) else None
    found = [job for job in jobs or () if isinstance(job, dict) and str(job.get("job_id")) == job_id]
    if not found:
        raise ValueError(f"no job {job_id!r} in the JSON")
    job = found[0]
    states = job.get("job_state") or ""
    states = [str(state) for state in states] if isinstance(states, list) else [str(states)]
    state = next((s for s in states if s in _BASE_STATES), states[0] if states else "")
    if "COMPLETING" in states and state in ("", "RUNNING"):
        state = "COMPLETING"
    code = job.get("exit_code")
    if isinstance(code, dict):       # 23.02 on: {"status": [...], "return_code": N, "signal": {"id": N}}
        exit_code, exit_signal = _number(code.get("return_code")), _number((code.get("signal") or {}).get("id"))
    else:                            # 22.05: a wait(2) status
        status = _number(code)
        exit_code, exit_signal = (status >> 8) & 0xFF, status & 0x7F
    return Job(job_id=job_id, user=str(job.get("user_name") or ""),
               uid=_number(job["user_id"]) if job.get("user_id") is not None else None,
               group=str(job.get("group_name") or ""), account=str(job.get("account") or ""),
               partition=str(job.get("partition") or ""), qos=str(job.get("qos") or ""),
               job_name=str(job.get("name") or ""), state=state, reason=str(job.get("state_reason") or ""),
               time_limit_s=_number(job.get("time_limit")) * 60, time_min_s=_number(job.get("time_minimum")) * 60,
               submit_time=_number(job.get("submit_time")), start_time=_number(job.get("start_time")),
               end_time=_number(job.get("end_time")), nodes=_number(job.get("node_count")),
               ntasks=_number(job.get("tasks")), ntasks_per_node=_number(job.get("tasks_per_node")),
               cpus_per_task=_number(job.get("cpus_per_task")) or 1, node_list=str(job.get("nodes") or ""),
               exit_code=exit_code, exit_signal=exit_signal, admin_comment=str(job.get("admin_comment") or ""),
               work_dir=str(job.get("current_working_directory") or ""))


def read_job(run, job_id: str, *, work_dir: bool = False) -> Job:
    """Job ``job_id`` from slurmctld. ``run(args, environment)`` runs a Slurm command and returns
    its stdout (``hookclient.run_command``), raising on failure. ``work_dir``: also read the
    working directory (one more call on 22.05). Raises what ``run`` raises, or ValueError."""
    try:
        return job_from_json(run(["scontrol", "show", "job", "--json", job_id], {}), job_id)
    except Exception:   # noqa: BLE001 - 22.05 has no --json ("unrecognized option"): squeue then
        pass
    found = job_from_squeue(run(["squeue", "--noheader", "--states=all", f"--jobs={job_id}",
                                 f"--Format={SQUEUE_FORMAT}"], SQUEUE_ENVIRONMENT).decode("utf-8", "replace"), job_id)
    if work_dir:
        text = run(["squeue", "--noheader", "--states=all", f"--jobs={job_id}", "--Format=WorkDir:0"], {})
        text = text.decode("utf-8", "replace")
        found = replace(found, work_dir=text[:-1] if text.endswith("\n") else text)
    return found


#: What slurmctld puts in the environment of PrologSlurmctld/EpilogSlurmctld (22.05 and 24.11)
_ENVIRONMENT_FIELDS = {"SLURM_JOB_USER": "user", "SLURM_JOB_GROUP": "group", "SLURM_JOB_ACCOUNT": "account",
                       "SLURM_JOB_PARTITION": "partition", "SLURM_JOB_NAME": "job_name",
                       "SLURM_JOB_WORK_DIR": "work_dir", "SLURM_JOB_NODELIST": "node_list"}


def with_environment(job: Job, environment) -> Job:
    """``job`` with the identity slurmctld gave PrologSlurmctld/EpilogSlurmctld in ``environment``
    (a variable it did not set keeps the value read); ValueError when the job ids differ."""
    if environment.get("SLURM_JOB_ID", job.job_id) != job.job_id:
        raise ValueError(f"SLURM_JOB_ID {environment.get('SLURM_JOB_ID')!r} is not job {job.job_id!r}")
    changes = {field: environment[name] for name, field in _ENVIRONMENT_FIELDS.items() if name in environment}
    uid = environment.get("SLURM_JOB_UID", "")
    if uid.isdigit():
        changes["uid"] = int(uid)
    if not changes.get("node_list", True):
        del changes["node_list"]        # keep what slurmctld showed when the variable is empty
    return replace(job, **changes)


def slurm_duration_s(text: str) -> int:
    """Slurm duration ("[D-]HH:MM:SS", "MM:SS", "MM") -> seconds; 0 for UNLIMITED/N/A/empty."""
    text = (text or "").strip()
    if not text or text.upper() in ("UNLIMITED", "N/A", "NONE", "INFINITE", "PARTITION_LIMIT"):
        return 0
    days = 0
    if "-" in text:
        head, text = text.split("-", 1)
        days = int(head)
    parts = [int(p) for p in text.split(":")] if text else [0]
    if len(parts) == 1:
        seconds = parts[0] * 60                     # bare number = minutes
    elif len(parts) == 2:
        seconds = parts[0] * 60 + parts[1]
    else:
        seconds = parts[0] * 3600 + parts[1] * 60 + parts[2]
    return days * 86400 + seconds


def _first_int(text: str, default: int = 0) -> int:
    match = re.match(r"\s*(\d+)", text or "")
    return int(match.group(1)) if match else default


# Our tagged field inside AdminComment: "{hpcpredict=<id>[;limit=auto][;time_min=auto]
# [;alloc=<id>;advice=...]}" anywhere in the text (the advice never holds braces); whatever else
# sites keep there (e.g. Jobstats' job summary) is left alone.
_OUR_FIELD = re.compile(r"\{hpcpredict=[^}]*\}")


def our_field(admin_comment: str) -> str:
    """Our field's content (without the brackets), or "" when AdminComment has none.

    A whole AdminComment starting with "hpcpredict=" is the unbracketed form hooks wrote before
    the field was delimited (jobs queued across an upgrade)."""
    text = admin_comment or ""
    match = _OUR_FIELD.search(text)
    if match:
        return match.group(0)[1:-1]
    return text if text.startswith(ADMIN_PREFIX) else ""


def with_our_field(admin_comment: str, field: str) -> str:
    """AdminComment with our field replaced by ``field`` and everything else kept."""
    text = admin_comment or ""
    rest = "" if text.startswith(ADMIN_PREFIX) and not _OUR_FIELD.search(text) else _OUR_FIELD.sub("", text).strip()
    return f"{rest} {{{field}}}" if rest else f"{{{field}}}"


def prediction_id(admin_comment: str) -> str:
    """The submission-time prediction id job_submit.lua wrote into our AdminComment field."""
    match = re.match(r"hpcpredict=([\w.:-]+)", our_field(admin_comment))
    return match.group(1) if match else ""


def linked_prediction_id(admin_comment: str) -> str:
    """The prediction an outcome belongs to: the submission one, else the allocation one."""
    match = re.search(r";alloc=([\w.:-]+)", our_field(admin_comment))
    return prediction_id(admin_comment) or (match.group(1) if match else "")


def job_request(job: Job, script: bytes = b"") -> dict:
    """A JobRequest (proto3 JSON, snake_case) describing ``job``."""
    import base64

    request = {
        "job": {"user": job.user, "account": job.account, "partition": job.partition, "job_name": job.job_name,
                "qos": job.qos, "group": job.group},
        "resources": {"nodes": job.nodes, "ntasks": job.ntasks, "ntasks_per_node": job.ntasks_per_node,
                      "cpus_per_task": job.cpus_per_task},
        "time_limit_s": job.time_limit_s,
        "job_id": job.job_id,
    }
    if job.submit_time:
        request["submit_time"] = job.submit_time
    if script:
        request["script"] = base64.b64encode(script).decode("ascii")
    return request


def _exit_status(job: Job, exit_code2: str) -> tuple[int, int]:
    """(exit code, signal): SLURM_JOB_EXIT_CODE2 ("code:signal") when given, else the job's."""
    if exit_code2:
        code, _, signal = exit_code2.partition(":")
        return _first_int(code), _first_int(signal)
    return job.exit_code, job.exit_signal


def snapshot_state(job: Job, exit_code2: str = "") -> str:
    """Best final state from EpilogSlurmctld's view (slurmctld says only COMPLETING there).

    TimeLimit -> TIMEOUT; a non-zero exit code -> FAILED; killed by a signal -> CANCELLED;
    otherwise COMPLETED. A job cancelled while running can look COMPLETED here, so the epilog
    prefers sacct's state when accounting answers in time.
    """
    code, signal = _exit_status(job, exit_code2)
    if job.state in ("TIMEOUT", "FAILED", "CANCELLED", "COMPLETED", "OUT_OF_MEMORY", "NODE_FAIL"):
        return job.state
    if job.reason == "TimeLimit":
        return "TIMEOUT"
    if job.reason == "OutOfMemory":
        return "OUT_OF_MEMORY"
    if code != 0 or job.reason == "NonZeroExitCode":
        return "FAILED"
    if signal != 0:
        return "CANCELLED"
    return "COMPLETED"


def outcome_from_snapshot(job: Job, exit_code2: str = "") -> dict:
    """An Outcome (proto3 JSON) from the epilog's view of the job. It always names the job's
    user and what it asked for (``request``): the daemon links it only to a prediction of that
    user, and takes the script and inputs from that prediction."""
    start, end = job.start_time, job.end_time
    return {
        "job_id": job.job_id,
        "prediction_id": linked_prediction_id(job.admin_comment),
        "submit_time": job.submit_time,
        "start_time": start, "end_time": end,
        "elapsed_s": float(max(0, end - start)) if start and end else float(job.run_time_s),
        "state": snapshot_state(job, exit_code2),
        "exit_code": _exit_status(job, exit_code2)[0],
        "node_list": job.node_list if job.node_list not in ("", "(null)") else "",
        "request": job_request(job),
    }


FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
                "BOOT_FAIL", "DEADLINE")


def sacct_final(job: dict) -> tuple[str, float, int, int, int] | None:
    """(state, elapsed_s, exit_code, start, end) of one ``sacct --json`` job once it is final."""
    state = job.get("state", {})
    state = state.get("current", "") if isinstance(state, dict) else str(state)
    state = state.split()[0] if state else ""
    if state not in FINAL_STATES:
        return None
    times = job.get("time", {})
    code = job.get("exit_code", {})
    exit_code = int(code.get("return_code", 0) or 0) if isinstance(code, dict) else 0
    for step in job.get("steps", ()) or ():  # the batch step carries the script's exit status
        step_code = step.get("exit_code", {})
        if isinstance(step_code, dict) and step_code.get("return_code"):
            exit_code = exit_code or int(step_code["return_code"])
    return (state, float(times.get("elapsed", 0)), exit_code, int(times.get("start", 0)), int(times.get("end", 0)))


# ------------------------------------------------------------------ the user's suggestion text
def human(seconds: float) -> str:
    """Same text as ``hpcpredict.daemon.timefmt.human`` and job_submit.lua's ``human`` (the hook
    scripts run under the system Python without the daemon package; a test compares all three)."""
    if seconds < 0 or not math.isfinite(seconds):
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def sane_seconds(value, cap_s: float) -> float | None:
    """``value`` as seconds when it is a finite number in (0, cap_s], else None."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and 0 < seconds <= cap_s else None


def insane_estimate(estimate: dict, cap_s: float) -> str:
    """Why an Estimate must change nothing (empty when it is sane): its runtime or its bound
    is not finite, not positive or above the site cap ``cap_s``."""
    for key in ("runtime_s", "suggested_time_limit_s"):
        if sane_seconds(estimate.get(key), cap_s) is None:
            return f"insane estimate: {key}={estimate.get(key)!r}"
    return ""


def allocation_time_limit(estimate: dict, job_limit_s: int, cap_s: float) -> str:
    """The TimeLimit (whole minutes, as ``scontrol update`` takes it) the allocation-time
    ``estimate`` tells PrologSlurmctld to set, once guarded: a whole number of minutes, below the
    job's limit ``job_limit_s``, at most ``cap_s``; "" to keep the job's.

    >>> allocation_time_limit({"apply_time_limit_s": 1020}, 2400, 86400)
    '17'
    >>> [allocation_time_limit({"apply_time_limit_s": s}, 2400, 86400) for s in (0, 1021, 2400, -60, "x")]
    ['', '', '', '', '']
    """
    seconds = sane_seconds(estimate.get("apply_time_limit_s"), cap_s)
    if seconds is None or seconds % 60 or not seconds < job_limit_s:
        return ""
    return str(int(seconds) // 60)


def slurm_minutes(seconds: float) -> str:
    """Seconds -> a --time value ("H:MM:00"), rounded up to a minute."""
    minutes = max(1, -(-int(seconds) // 60))
    return f"{minutes // 60}:{minutes % 60:02d}:00"


def slurm_limit(seconds: float) -> str:
    """Seconds -> ``[D-]HH:MM:SS`` rounded up to a minute: the daemon's spelling of a --time
    (hpcpredict.daemon.timefmt.slurm_time; these scripts import nothing of the daemon), so the
    job output names the suggestion in the very words of the sbatch line and ``explain``.

    >>> slurm_limit(420), slurm_limit(129600), slurm_limit(61)
    ('00:07:00', '1-12:00:00', '00:02:00')
    """
    minutes = max(1, -(-int(math.ceil(seconds)) // 60))
    days, rest = divmod(minutes, 1440)
    text = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{text}" if days else text


#: What Slurm shows as the TimeLimit of a running job without one (INFINITE runs as a year).
UNLIMITED_RUNNING_S = 365 * 86400


def user_time_limit(time_limit_s: int, field: str) -> int:
    """The ``--time`` the user gave (seconds), from the job's TimeLimit and our AdminComment
    ``field``; 0 when the user gave none (the hook's ``;time=none``: the limit is the
    partition's) or the limit is unlimited (0, or the year a running unlimited job shows).

    >>> user_time_limit(600, "hpcpredict=ab"), user_time_limit(600, "hpcpredict=ab;time=none")
    (600, 0)
    >>> user_time_limit(UNLIMITED_RUNNING_S, "hpcpredict=ab"), user_time_limit(0, "")
    (0, 0)
    """
    if ";time=none" in (field or "") or time_limit_s >= UNLIMITED_RUNNING_S:
        return 0
    return max(int(time_limit_s), 0)


def suggestion_lines(estimate: dict, requested_s: int, node_list: str, *, time_min_s: int = 0,
                     chosen_by_us: bool = False) -> list[str]:
    """What the job's output shows (TaskProlog), from the allocation-time Estimate.

    ``requested_s``: the user's --time (0 = none given: the partition's default or unlimited,
    or, ``chosen_by_us``, the limit hpcpredict set); ``time_min_s``: the --time-min hpcpredict
    set at submission (0 = none), in which case backfill may have lowered the limit to it, and
    the line says the limit the job has, not what the user asked.
    """
    interval = estimate.get("interval") or {}
    runtime = float(estimate.get("runtime_s", 0) or 0)
    low, high = float(interval.get("low_s", 0) or 0), float(interval.get("high_s", 0) or 0)
    coverage = float(interval.get("coverage", 0) or 0)
    bound = float(estimate.get("suggested_time_limit_s", 0) or 0) or high or runtime
    kind = f"{coverage:.0%} interval" if coverage > 0 else "range of recent runs"
    span = f" ({human(low)} - {human(high)}, {kind})" if high > low > 0 else ""
    lines = [f"predicted runtime {human(runtime)}{span} on {node_list}"]
    if requested_s and time_min_s:
        asked = (f"time limit {slurm_minutes(requested_s)} (hpcpredict set --time-min={slurm_minutes(time_min_s)}: "
                 f"backfill may lower --time to it to start a job early)")
    elif requested_s:
        asked = f"you requested --time={slurm_minutes(requested_s)}"
    elif chosen_by_us:
        asked = "you gave no --time (hpcpredict set the limit)"
    else:
        asked = "no --time given (partition default/unlimited)"
    lines.append(f"{asked}; suggested --time={slurm_limit(bound)} for the next run like this one")
    for text in estimate.get("explanation", ())[:4]:
        lines.append(str(text))
    best = [row for row in estimate.get("node_advice", ()) if row.get("recommended")]
    if best:
        row = best[0]
        lines.append(f"node-count advice: {row.get('nodes')} nodes, about {human(float(row.get('runtime_s', 0)))} "
                     f"({float(row.get('node_hours', 0)):.1f} node-hours)")
    if estimate.get("fallback"):
        lines.append("(no history for this application yet: this is a default, not a prediction)")
    clean = str.maketrans({"|": "/", "\n": " ", "{": "(", "}": ")"})
    return [line.translate(clean).replace(";;", ";") for line in lines]


def admin_field(submit_id: str, allocation_id: str, lines: list[str], *, flags: str = "") -> str:
    """Our AdminComment field: both prediction ids, the flags (";limit=auto", ";time_min=auto",
    ";runtime_s=N") and the suggestion for the TaskProlog."""
    head = f"{ADMIN_PREFIX}{submit_id}{flags};alloc={allocation_id};advice="
    return head + ADVICE_SEPARATOR.join(lines)


def sane_advice(field: str, cap_s: float) -> bool:
    """Our AdminComment ``field`` (:func:`our_field`) carries the sane ``;runtime_s=`` the
    PrologSlurmctld stored beside its advice (the numbers stay out of the job's output)."""
    match = re.search(r";runtime_s=([^;\s}]+)", field or "")
    return match is not None and sane_seconds(match.group(1), cap_s) is not None


def advice_from_admin_comment(text: str) -> list[str]:
    """The suggestion lines the PrologSlurmctld stored (empty when there are none)."""
    _, found, advice = our_field(text).partition(";advice=")
    if not found or not advice.strip():
        return []
    return [line.strip() for line in advice.split(ADVICE_SEPARATOR) if line.strip()]
