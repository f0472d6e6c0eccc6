"""Pure helpers of the Slurm hook scripts: parse what Slurm prints, build hook requests.

Standard library only (the hook scripts run under the system Python). No I/O here: the
scripts run the commands (``hookclient.run_command``) and pass the text in.

Example::

    >>> job = parse_scontrol_job("JobId=7 JobName=lmp UserId=alice(1001) JobState=COMPLETING "
    ...     "Reason=TimeLimit ExitCode=0:0 TimeLimit=00:01:00 StartTime=2026-11-21T06:04:17 "
    ...     "EndTime=2026-11-21T06:05:19 NumNodes=2 NumTasks=8 AdminComment=hpcpredict=p-1")
    >>> job["UserId"], job["AdminComment"], slurm_duration_s(job["TimeLimit"])
    ('alice(1001)', 'hpcpredict=p-1', 60)
    >>> snapshot_state(job, exit_code2="0:0")
    'TIMEOUT'
"""
from __future__ import annotations

import math
import re
import time

# "Key=value" pairs of `scontrol show job` (22.05): a key starts after whitespace.
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")
ADVICE_SEPARATOR = " | "
ADMIN_PREFIX = "hpcpredict="


# In the multi-line form these fields stand alone on their line and may contain spaces and
# "=" (AdminComment carries the suggestion text), so the whole line is their value.
WHOLE_LINE_KEYS = ("AdminComment", "Comment", "Command", "WorkDir", "StdErr", "StdIn", "StdOut")


def parse_scontrol_job(text: str) -> dict:
    """``scontrol show job ID`` output (multi-line, or one line with ``-o``) -> {Key: value}."""
    fields: dict = {}
    for line in text.splitlines():
        line = line.strip()
        key = line.split("=", 1)[0]
        if key in WHOLE_LINE_KEYS and "\n" in text.strip():
            fields.setdefault(key, line[len(key) + 1:].strip())
            continue
        matches = list(_KEY.finditer(line))
        for index, match in enumerate(matches):
            end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
            fields.setdefault(match.group(1), line[match.end():end].strip())
    return fields


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


def slurm_timestamp(text: str) -> int:
    """scontrol's local-time "YYYY-MM-DDTHH:MM:SS" -> Unix seconds; 0 for Unknown/None."""
    try:
        return int(time.mktime(time.strptime(text.strip(), "%Y-%m-%dT%H:%M:%S")))
    except (ValueError, AttributeError):
        return 0


def _first_int(text: str, default: int = 0) -> int:
    match = re.match(r"\s*(\d+)", text or "")
    return int(match.group(1)) if match else default


def user_name(field: str) -> str:
    """"alice(1001)" -> "alice"."""
    return (field or "").split("(", 1)[0]


def user_uid(field: str) -> int | None:
    """"alice(1001)" -> 1001; None when the uid is not shown."""
    _, sep, rest = (field or "").partition("(")
    uid = rest[:-1] if sep and rest.endswith(")") else ""
    return int(uid) if uid.isdigit() else None


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


def job_request(job: dict, script: bytes = b"") -> dict:
    """A JobRequest (proto3 JSON, snake_case) from a parsed ``scontrol show job`` record."""
    import base64

    per_node = (job.get("NtasksPerN:B:S:C") or "0").split(":")[0]
    request = {
        "job": {"user": user_name(job.get("UserId", "")), "account": job.get("Account", ""),
                "partition": job.get("Partition", ""), "job_name": job.get("JobName", ""),
                "qos": job.get("QOS", ""), "group": user_name(job.get("GroupId", ""))},
        "resources": {"nodes": _first_int(job.get("NumNodes", "")), "ntasks": _first_int(job.get("NumTasks", "")),
                      "ntasks_per_node": _first_int(per_node), "cpus_per_task": _first_int(job.get("CPUs/Task", ""), 1)},
        "time_limit_s": slurm_duration_s(job.get("TimeLimit", "")),
        "job_id": job.get("JobId", ""),
    }
    submit = slurm_timestamp(job.get("SubmitTime", ""))
    if submit:
        request["submit_time"] = submit
    if script:
        request["script"] = base64.b64encode(script).decode("ascii")
    return request


def snapshot_state(job: dict, exit_code2: str = "") -> str:
    """Best final state from EpilogSlurmctld's view (scontrol says only COMPLETING there).

    TimeLimit -> TIMEOUT; a non-zero exit code -> FAILED; killed by a signal -> CANCELLED;
    otherwise COMPLETED. A job cancelled while running can look COMPLETED here, so the epilog
    prefers sacct's state when accounting answers in time.
    """
    reason = job.get("Reason", "")
    code, _, signal = (exit_code2 or job.get("ExitCode", "0:0")).partition(":")
    state = job.get("JobState", "")
    if state in ("TIMEOUT", "FAILED", "CANCELLED", "COMPLETED", "OUT_OF_MEMORY", "NODE_FAIL"):
        return state
    if reason == "TimeLimit":
        return "TIMEOUT"
    if reason == "OutOfMemory":
        return "OUT_OF_MEMORY"
    if _first_int(code) != 0 or reason == "NonZeroExitCode":
        return "FAILED"
    if _first_int(signal) != 0:
        return "CANCELLED"
    return "COMPLETED"


def outcome_from_snapshot(job: dict, exit_code2: str = "") -> dict:
    """An Outcome (proto3 JSON) from the epilog's scontrol record."""
    start, end = slurm_timestamp(job.get("StartTime", "")), slurm_timestamp(job.get("EndTime", ""))
    linked = linked_prediction_id(job.get("AdminComment", ""))
    outcome = {
        "job_id": job.get("JobId", ""),
        "prediction_id": linked,
        "submit_time": slurm_timestamp(job.get("SubmitTime", "")),
        "start_time": start, "end_time": end,
        "elapsed_s": float(max(0, end - start)) if start and end else float(slurm_duration_s(job.get("RunTime", ""))),
        "state": snapshot_state(job, exit_code2),
        "exit_code": _first_int((exit_code2 or job.get("ExitCode", "0:0")).split(":")[0]),
        "node_list": job.get("NodeList", "") if job.get("NodeList", "") not in ("", "(null)") else "",
    }
    if not linked:
        # Without a prediction the daemon has no stored request (which carries the script and
        # its arguments): describe the job from what scontrol shows.
        outcome["request"] = job_request(job)
    return outcome


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


def slurm_minutes(seconds: float) -> str:
    """Seconds -> a --time value ("H:MM:00"), rounded up to a minute."""
    minutes = max(1, -(-int(seconds) // 60))
    return f"{minutes // 60}:{minutes % 60:02d}:00"


def suggestion_lines(estimate: dict, requested_s: int, node_list: str, *, time_min_s: int = 0) -> list[str]:
    """What the job's output shows (TaskProlog), from the allocation-time Estimate.

    ``requested_s``: the job's time limit now (0 = hpcpredict chose it); ``time_min_s``: the
    --time-min hpcpredict set at submission (0 = none), in which case backfill may have lowered
    the limit to it, and the line says the limit the job has, not what the user asked.
    """
    interval = estimate.get("interval") or {}
    runtime = float(estimate.get("runtime_s", 0) or 0)
    low, high = float(interval.get("low_s", 0) or 0), float(interval.get("high_s", 0) or 0)
    coverage = float(interval.get("coverage", 0) or 0)
    bound = float(estimate.get("suggested_time_limit_s", 0) or 0) or high or runtime
    kind = f"{coverage:.0%} interval" if coverage > 0 else "range of recent runs"
    span = f" ({human(low)} - {human(high)}, {kind})" if high > low > 0 else ""
    lines = [f"predicted runtime {human(runtime)}{span} on {node_list} [runtime_s={runtime:.0f} "
             f"low_s={low:.0f} high_s={high:.0f} id={estimate.get('prediction_id', '')}]"]
    if requested_s and time_min_s:
        asked = (f"time limit {slurm_minutes(requested_s)} (hpcpredict set --time-min={slurm_minutes(time_min_s)}: "
                 f"backfill may lower --time to it to start a job early)")
    elif requested_s:
        asked = f"you requested --time={slurm_minutes(requested_s)}"
    else:
        asked = "you gave no --time"
    lines.append(f"{asked}; suggested --time={slurm_minutes(bound)} for the next run like this one")
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
    """Our AdminComment field: both prediction ids, the submission's flags (";limit=auto",
    ";time_min=auto") and the suggestion for the TaskProlog."""
    head = f"{ADMIN_PREFIX}{submit_id}{flags};alloc={allocation_id};advice="
    return head + ADVICE_SEPARATOR.join(lines)


def sane_advice(first_line: str, cap_s: float) -> bool:
    """The advice's first line carries a sane ``runtime_s=`` (see :func:`suggestion_lines`)."""
    match = re.search(r"\[runtime_s=([^\s\]]+)", first_line or "")
    return match is not None and sane_seconds(match.group(1), cap_s) is not None


def advice_from_admin_comment(text: str) -> list[str]:
    """The suggestion lines the PrologSlurmctld stored (empty when there are none)."""
    _, found, advice = our_field(text).partition(";advice=")
    if not found or not advice.strip():
        return []
    return [line.strip() for line in advice.split(ADVICE_SEPARATOR) if line.strip()]
