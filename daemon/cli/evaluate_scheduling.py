"""`hpcpredict evaluate scheduling TRACE`: replay a trace through EASY backfilling per policy.

Prints a table (or one JSON object with ``--json``) keyed by policy name (``user``,
``hpcpredict``, ``oracle``; ``--all-policies`` adds ``oracle-time-min``, ``hpcpredict-time``,
``hpcpredict-soft`` and ``hpcpredict-soft-point``), each with ``n``, ``mean_wait_s``, ``mean_bounded_slowdown``,
``utilization``, ``killed``, ``killed_node_hours``, ``killed_censored``, ``backfilled``,
``lowered``, ``shortened``, ``procs`` and ``dropped``. The machine size comes from the SWF
header (``; MaxProcs:``, else ``; MaxNodes:``); ``--procs`` overrides it. ``--time-min-limit``
says what a job backfilled on its ``--time-min`` runs under (Slurm 22.05: the ``time_min``).
``--resubmit-killed`` makes kills cost what they cost: a job a policy's limit killed is
submitted again at its kill with the user's own request, and scored from its first submission
to its final end (its lost run counted as waiting); each policy then also has ``resubmitted``.
"""
from __future__ import annotations

import json
import sys

from .evaluate_walltime import _check_risk, add_trace_arguments


def register(families) -> None:
    parser = families.add_parser(
        "scheduling", help="replay a trace through EASY backfilling under each walltime policy",
        description="Replay TRACE in submission order through EASY backfilling with Slurm's "
                    "--time-min semantics, once per walltime policy, and compare the queues.")
    add_trace_arguments(parser)
    parser.add_argument("--procs", type=int, default=None,
                        help="machine size in processors (default: the SWF header's MaxProcs/MaxNodes)")
    parser.add_argument("--all-policies", action="store_true",
                        help="also the policies a site could choose instead (oracle-time-min, "
                             "hpcpredict-time, hpcpredict-soft, hpcpredict-soft-point)")
    parser.add_argument("--time-min-limit", choices=("time_min", "reservation", "any-start"), default="time_min",
                        help="the limit of a job backfill starts on its --time-min: 'time_min' (Slurm "
                             "22.05, the default), 'reservation' (later Slurm: the time left before "
                             "the reservation it would overlap) or 'any-start' (22.05 at worst: every "
                             "job with a --time-min runs under it, also those started at the head)")
    parser.add_argument("--resubmit-killed", action="store_true",
                        help="a job killed by a limit below its request is submitted again at its kill "
                             "with the user's request (no --time-min) and scored from its first "
                             "submission to its final end (default: a killed job counts as done)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args) -> int:
    _check_risk(args.risk)
    from ..errors import InvalidRequest, ParseError
    from ..history.traces import read_trace
    from ..scheduling.policies import DEFAULT_POLICIES, POLICIES
    from ..scheduling.replay import evaluate_scheduling
    from ..scheduling.workload import trace_machine_size

    procs = args.procs
    if procs is not None and procs <= 0:
        raise InvalidRequest("--procs", f"must be a positive number of processors, got {procs}")
    jobs = read_trace(args.trace, args.format)
    if procs is None:
        procs = trace_machine_size(args.trace)
        if procs is None:
            raise InvalidRequest("--procs", f"{args.trace} has no '; MaxProcs:' or '; MaxNodes:' header "
                                            "line: give the machine size with --procs N")
    if not any(j.runtime_s >= 0 and j.submit_time >= 0 for j in jobs):
        raise ParseError("no job with a known submit time and runtime", source=args.trace)
    policies = list(POLICIES) if args.all_policies else list(DEFAULT_POLICIES)
    if len(jobs) > 5000 and sys.stderr.isatty() and not args.json:
        scores = _with_progress(jobs, procs, args.risk, policies, args.time_min_limit, args.resubmit_killed)
    else:
        scores = evaluate_scheduling(jobs, procs, args.risk, policies, time_min_limit=args.time_min_limit,
                                     resubmit_killed=args.resubmit_killed)
    if args.json:
        print(json.dumps(scores))
    else:
        _print_table(args.trace, args.risk, procs, scores)
    return 0


def _with_progress(jobs, procs, risk, policies, time_min_limit, resubmit_killed):
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    from ..scheduling.replay import evaluate_scheduling

    with Progress(TextColumn("predicting online"), BarColumn(), TextColumn("{task.completed}/{task.total} jobs"),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("predict", total=len(jobs))
        return evaluate_scheduling(jobs, procs, risk, policies, time_min_limit=time_min_limit,
                                   resubmit_killed=resubmit_killed,
                                   progress=lambda done, total: bar.update(task, completed=done, total=total))


def _print_table(trace: str, risk: float, procs: int, scores: dict) -> None:
    from rich.table import Table

    from .common import output_console

    first = next(iter(scores.values()))
    table = Table(title=f"EASY backfilling replay, {procs} processors, bound risk {risk:g}",
                  caption=f"{trace}: {first['n']} jobs replayed, {first['dropped']} dropped. bsld = mean "
                          "bounded slowdown (tau 10 s); shortened = limits the policy set below the "
                          "request; lowered = limits backfill cut to a time_min"
                          + ("; killed jobs resubmitted with their request, scored to their final end"
                             if "resubmitted" in first else ""))
    table.add_column("policy", no_wrap=True)
    for column in ("wait min", "bsld", "util", "shortened", "lowered", "killed", "killed proc-h"):
        table.add_column(column, justify="right")
    for name, s in scores.items():
        table.add_row(name, f"{s['mean_wait_s'] / 60:.0f}", f"{s['mean_bounded_slowdown']:.2f}",
                      f"{100 * s['utilization']:.1f}%", str(s["shortened"]), str(s["lowered"]),
                      str(s["killed"]), f"{s['killed_node_hours']:.0f}")
    console = output_console()
    console.print(table)
    if {"user", "oracle", "hpcpredict"} <= scores.keys():
        room = scores["user"]["mean_bounded_slowdown"] - scores["oracle"]["mean_bounded_slowdown"]
        gain = scores["user"]["mean_bounded_slowdown"] - scores["hpcpredict"]["mean_bounded_slowdown"]
        if room > 0:
            console.print(f"hpcpredict captures {100 * gain / room:.0f} % of the oracle's improvement "
                          f"in mean bounded slowdown ({gain:.2f} of {room:.2f}).")
        else:
            console.print("the oracle does not improve the mean bounded slowdown on this trace "
                          f"(oracle - user = {-room:.2f}); hpcpredict - user = {-gain:.2f}.")
