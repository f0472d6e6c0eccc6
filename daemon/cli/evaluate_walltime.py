"""`hpcpredict evaluate walltime TRACE`: replay a job trace online with every walltime predictor.

Prints a table (or one JSON object with ``--json``) keyed by predictor name: ``user``,
``last2``, ``alea-max5``, ``cesnet``, ``ecmwf``, ``hpcpredict`` (our point estimate) and
``hpcpredict-bound`` (our upper bound at ``--risk``), each with ``n``, ``accuracy``,
``under_rate``, ``kill_rate``, ``median_ratio`` and ``mae_s`` (COLUMNS below, also in ``--help``).
"""
from __future__ import annotations

import argparse
import json
import math
import sys

FORMAT_CHOICES = ("swf", "sacct-json", "sacct-csv", "sacct-parsable")
COLUMNS = """columns (p predicted, r actual runtime of each scored job):
  n             jobs scored
  accuracy      mean min(p, r)/max(p, r): 1 = exact
  under_rate    share with p < r (a limit at p would have been too short)
  kill_rate     among the jobs that ended within their request: share with p < r (a limit at p kills them)
  median_ratio  median p/r
  mae_s         mean |p - r|, seconds
predictors: user (the request), last2 (mean of the user's last two runtimes), alea-max5, cesnet, ecmwf
(published baselines), hpcpredict (our point estimate), hpcpredict-bound (our bound at --risk)"""


def add_trace_arguments(parser) -> None:
    """TRACE, --format and --risk: the options of every command that replays a trace."""
    parser.add_argument("trace", metavar="TRACE", help="job trace file (SWF, sacct JSON / -P, sacct-like CSV)")
    parser.add_argument("--format", choices=FORMAT_CHOICES, default=None,
                        help="trace format (default: guessed from the content)")
    parser.add_argument("--risk", type=float, default=0.03,
                        help="target probability that a job outlives our bound (default 0.03)")


def register(families) -> None:
    parser = families.add_parser(
        "walltime", help="replay a job trace online and score every walltime predictor",
        description="Replay TRACE in submission order (a job only sees jobs that ended before "
                    "its submission) and score the baselines and our model.",
        epilog=COLUMNS, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_trace_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def _check_risk(risk: float, option: str = "--risk") -> None:
    from ..errors import InvalidRequest

    if not (0.0 < risk < 1.0) or math.isnan(risk):
        raise InvalidRequest(option, f"must be between 0 and 1 (exclusive), got {risk}")


def run(args) -> int:
    _check_risk(args.risk)
    from ..errors import ParseError
    from ..lab.history import evaluate_trace, read_trace, scorable

    jobs = read_trace(args.trace, args.format)
    if not scorable(jobs):
        raise ParseError("no job with a known submit time and runtime", source=args.trace)
    if len(jobs) > 5000 and sys.stderr.isatty():
        scores = _with_progress(jobs, args.risk)
    else:
        scores = evaluate_trace(jobs, args.risk)
    if args.json:
        print(json.dumps({name: s.as_dict() for name, s in scores.items()}, indent=None))
    else:
        _print_table(args.trace, args.risk, scores)
    return 0


def _with_progress(jobs, risk):
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.console import Console

    from ..lab.history import evaluate_trace

    with Progress(TextColumn("replaying"), BarColumn(), TextColumn("{task.completed}/{task.total} jobs"),
                  TimeRemainingColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task("replay", total=len(jobs))
        return evaluate_trace(jobs, risk, progress=lambda done, total: bar.update(task, completed=done, total=total))


def _print_table(trace: str, risk: float, scores) -> None:
    from rich.table import Table

    from .common import output_console

    table = Table(title=f"walltime predictors on {trace} (online replay, bound risk {risk:g})")
    for column in ("predictor", "n", "accuracy", "under", "kill", "median p/r", "MAE"):
        table.add_column(column, justify="left" if column == "predictor" else "right")
    for name, s in scores.items():
        table.add_row(name, str(s.n), f"{s.accuracy:.3f}", f"{100 * s.under_rate:.1f} %",
                      f"{100 * s.kill_rate:.1f} %", f"{s.median_ratio:.2f}", f"{s.mae_s / 60:.0f} min")
    output_console().print(table)
