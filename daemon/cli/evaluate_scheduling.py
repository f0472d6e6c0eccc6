"""`hpcpredict evaluate scheduling TRACE`: replay a trace through EASY backfilling per policy.

Prints a table (or one JSON object with ``--json``) keyed by policy name (``user``,
``hpcpredict``, ``oracle``, ``easy++``; ``--all-policies`` adds ``hpcpredict-soft``,
``hpcpredict-bound``, ``hpcpredict-time`` and ``oracle-time-min``), each with ``n``,
``mean_wait_s``, ``mean_bounded_slowdown``, ``utilization``, ``killed``, ``killed_node_hours``,
``killed_censored``, ``backfilled``, ``lowered``, ``shortened``, ``procs``, ``dropped`` and the
wait tail: ``p99_wait_s``, ``max_wait_s``, and over the widest jobs (processor count at or
above the trace's 95th percentile, ``wide_procs``; ``wide_n`` jobs) ``wide_mean_wait_s``,
``wide_p99_wait_s``, ``wide_max_wait_s``. The machine size comes from the SWF header
(``; MaxProcs:``, else ``; MaxNodes:``); ``--procs`` overrides it.

``--slurm RELEASE`` (a release number ``X.Y[.Z]``: ``22.05``, ``23.02``, ``23.11``, ``24.11``
(the default), ``24.11.5``, ``25.05.3``, ``25.05.4``, ``25.11``, ``26.05``, ``26.05.5``...; a
missing patch level is ``.0``) says whose ``--time-min`` semantics are replayed
(``daemon/scheduling/easy.py``). With ``SchedulerParameters=time_min_as_soft_limit``, the
product's main path, a job backfill starts on its ``--time-min`` keeps its ``--time``, and
once running is planned for every other job at its hard end (23.11.0 - 25.05.3) or at its
soft end, then halfway to its hard end at every pass (25.05.4, 25.11 and later). Before 23.11
the option does not exist (slurmctld ignores the word): a backfill start runs under its
``--time-min``. ``--no-soft-limit`` replays a release without the option (23.11 - 25.05.2:
every start runs under exactly its ``--time-min``; 25.05.3 and later: the limit is lowered
only to the room before the next reservation). ``hpcpredict`` is the product's default policy
for that cluster: the soft ``--time-min`` where the option is set (the estimate at
``--soft-risk``, default ``[policy] soft_risk_hard_end`` or ``soft_risk_halfway`` by the rule;
``--soft-max-slip`` and ``--soft-max-ratio`` as ``[policy] soft_max_slip_s`` and
``soft_max_ratio``), nothing changed (``advise``) where it is not.
``--resubmit-killed`` makes kills cost what they cost: a job a policy's limit killed is
submitted again at its kill with the user's own request, and scored from its first submission
to its final end (its lost run counted as waiting); each policy then also has ``resubmitted``.
"""
from __future__ import annotations

import json
import sys

from .evaluate_walltime import _check_risk, add_trace_arguments


def add_replay_arguments(parser, *, slurm_help: str) -> None:
    """TRACE, --format, --risk, --procs and --slurm: the options of every command that replays a
    trace through EASY backfilling (this one, ``evaluate forecast``); :func:`read_replay` reads them."""
    add_trace_arguments(parser)
    parser.add_argument("--procs", type=int, default=None,
                        help="machine size in processors (default: the SWF header's MaxProcs/MaxNodes)")
    # checked when run, not by choices=: the releases live in the lab, imported when it runs (cli/main.py)
    parser.add_argument("--slurm", metavar="RELEASE", help=slurm_help)


def read_replay(args) -> tuple[list, int]:
    """The options :func:`add_replay_arguments` added, checked (``args.slurm`` defaulted), and the
    trace: (its jobs, the machine's size in processors)."""
    _check_risk(args.risk)
    from ..errors import InvalidRequest, ParseError
    from ..lab.history import read_trace
    from ..lab.scheduling import DEFAULT_RELEASE, planning_rule, trace_machine_size

    args.slurm = args.slurm or DEFAULT_RELEASE
    try:
        planning_rule(args.slurm)
    except ValueError as error:
        raise InvalidRequest("--slurm", str(error)) from None
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
    return jobs, procs


def register(families) -> None:
    parser = families.add_parser(
        "scheduling", help="replay a trace through EASY backfilling under each walltime policy",
        description="Replay TRACE in submission order through EASY backfilling with Slurm's "
                    "--time-min semantics, once per walltime policy, and compare the queues.")
    add_replay_arguments(
        parser, slurm_help="the Slurm release whose --time-min semantics are replayed, X.Y[.Z] (a "
                           "missing patch level is .0): before 23.11 (22.05, 23.02) a job backfill "
                           "starts on its --time-min runs under it; from 23.11 with "
                           "time_min_as_soft_limit (unless --no-soft-limit) it keeps its --time and is "
                           "planned at its hard end (to 25.05.3) or at its soft end, then halfway to "
                           "its hard end (25.05.4, 25.11 and later). Default: 24.11")
    parser.add_argument("--all-policies", action="store_true",
                        help="also the policies a site could choose instead (hpcpredict-soft, "
                             "hpcpredict-bound, hpcpredict-time, oracle-time-min)")
    parser.add_argument("--no-soft-limit", action="store_true",
                        help="the cluster runs without SchedulerParameters=time_min_as_soft_limit: "
                             "--time-min is a kill limit (23.11-25.05.2: every start runs under exactly "
                             "it; 25.05.3 and later: lowered only to the room before the next reservation)")
    parser.add_argument("--soft-max-ratio", type=float, default=None, metavar="K",
                        help="hpcpredict's soft --time-min only where --time <= K x the estimate "
                             "(0: no guard; default: [policy] soft_max_ratio's default)")
    parser.add_argument("--soft-risk", type=float, default=None, metavar="R",
                        help="hpcpredict's soft --time-min is the runtime a job outlives with probability R "
                             "(default: [policy] soft_risk_hard_end's or soft_risk_halfway's default, by the "
                             "release's planning rule)")
    parser.add_argument("--soft-max-slip", type=float, default=None, metavar="S",
                        help="hpcpredict's soft --time-min only where the slip it can cause a waiting "
                             "reservation (the window the rule opens x the job's share of the machine) is "
                             "at most S seconds (0: no guard; default: [policy] soft_max_slip_s's default)")
    parser.add_argument("--resubmit-killed", action="store_true",
                        help="a job killed by a limit below its request is submitted again at its kill "
                             "with the user's request (no --time-min) and scored from its first "
                             "submission to its final end (default: a killed job counts as done)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args) -> int:
    from ..errors import InvalidRequest
    from ..lab.scheduling import DEFAULT_POLICIES, POLICIES, evaluate_scheduling, planning_rule

    jobs, procs = read_replay(args)
    if args.soft_max_ratio is not None and not (0 <= args.soft_max_ratio < float("inf")):
        raise InvalidRequest("--soft-max-ratio", f"must be a finite number >= 0, got {args.soft_max_ratio}")
    if args.soft_risk is not None:
        _check_risk(args.soft_risk, "--soft-risk")
    if args.soft_max_slip is not None and not (0 <= args.soft_max_slip < float("inf")):
        raise InvalidRequest("--soft-max-slip", f"must be a finite number >= 0, got {args.soft_max_slip}")
    policies = list(POLICIES) if args.all_policies else list(DEFAULT_POLICIES)
    options = dict(slurm=args.slurm, soft_limit=False if args.no_soft_limit else None,
                   resubmit_killed=args.resubmit_killed, soft_max_ratio=args.soft_max_ratio,
                   soft_max_slip_s=args.soft_max_slip)
    if args.soft_risk is not None:
        options["soft_risk"] = args.soft_risk
    if len(jobs) > 5000 and sys.stderr.isatty() and not args.json:
        scores = _with_progress(jobs, procs, args.risk, policies, options)
    else:
        scores = evaluate_scheduling(jobs, procs, args.risk, policies, **options)
    if args.json:
        print(json.dumps(scores))
    else:
        rule = planning_rule(args.slurm, options["soft_limit"])
        _print_table(args.trace, args.risk, procs, scores, f"Slurm {args.slurm}" + (
            f" with time_min_as_soft_limit (a running soft job planned: {rule.replace('_', ' ')})" if rule else
            "" if options["soft_limit"] is False else ", --time-min a kill limit"))
    return 0


def _with_progress(jobs, procs, risk, policies, options):
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn

    from ..lab.scheduling import evaluate_scheduling

    with Progress(TextColumn("predicting online"), BarColumn(), TextColumn("{task.completed}/{task.total} jobs"),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("predict", total=len(jobs))
        return evaluate_scheduling(jobs, procs, risk, policies, **options,
                                   progress=lambda done, total: bar.update(task, completed=done, total=total))


def _print_table(trace: str, risk: float, procs: int, scores: dict, semantics: str) -> None:
    from rich.table import Table

    from .common import output_console

    first = next(iter(scores.values()))
    table = Table(title=f"EASY backfilling replay, {procs} processors, {semantics}, bound risk {risk:g}",
                  caption=f"{trace}: {first['n']} jobs replayed, {first['dropped']} dropped. bsld = mean "
                          f"bounded slowdown (tau 10 s); p99 h = 99th percentile of the wait, hours; wide = the "
                          f"{first['wide_n']} jobs of >= {first['wide_procs']:g} processors; shortened = limits "
                          "or time_min the policy set below the request; lowered = limits backfill cut"
                          + ("; killed jobs resubmitted with their request, scored to their final end"
                             if "resubmitted" in first else ""))
    table.add_column("policy", no_wrap=True)
    for column in ("wait min", "p99 h", "wide p99 h", "bsld", "util", "shortened", "lowered", "killed",
                   "killed proc-h"):
        table.add_column(column, justify="right")
    for name, s in scores.items():
        table.add_row(name, f"{s['mean_wait_s'] / 60:.0f}", f"{s['p99_wait_s'] / 3600:.1f}",
                      f"{s['wide_p99_wait_s'] / 3600:.1f}", f"{s['mean_bounded_slowdown']:.2f}",
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
