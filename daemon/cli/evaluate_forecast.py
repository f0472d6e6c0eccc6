"""`hpcpredict evaluate forecast TRACE`: the start-time forecast measured inside the replay.

Replays TRACE as ``evaluate scheduling`` does (same trace reading, machine size, ``--slurm``)
under one policy (``--policy user``, the users' own limits, today's Slurm, the default; or
``hpcpredict``, the product's default policy for the release) and, at the submission of every
``--every``-th job still waiting after that instant's pass, forecasts its start from the
replay's queue (``daemon/forecast``, ``--runs`` runs) and Slurm's method (every job at its
limit, ``squeue --start``), against its actual start in the same replay
(``daemon/lab/scheduling/forecast.py``).

``--json`` prints one object: ``hpcpredict`` (our forecast) and ``slurm`` (every job at its
limit), each with ``n``, ``median_abs_error_s``, ``coverage80`` (the share of actual starts in
the 80 % interval, calibrated on the realized errors of earlier forecasts unless
``--no-calibration``; ``slurm``'s is null; ``hpcpredict`` also ``coverage80_uncalibrated``)
and ``by_wait`` (``short``: actual wait below ``long_wait_s``, 1 h; ``long``: at or above; each
with the same three keys), computed over the jobs forecast (every one waited); beside them
``policy``, ``slurm_release``, ``planning_rule``, ``runs``, ``sampled_every``, ``spread``,
``arrivals`` (later submissions modelled, unless ``--no-arrivals``), ``calibrated``, ``seed``,
``long_wait_s``, ``n``, ``n_jobs``, ``not_forecast_queue_too_large``, ``procs`` and
``simplifies`` (what the forecast leaves out).
"""
from __future__ import annotations

import json

from .evaluate_scheduling import add_replay_arguments, read_replay


def register(families) -> None:
    parser = families.add_parser(
        "forecast", help="replay a trace and score the start-time forecast made at each submission",
        description="Replay TRACE through EASY backfilling and, at each (sampled) submission, forecast "
                    "the job's start from the replay's queue; compare with its actual start and with "
                    "Slurm's method (every job at its time limit).")
    add_replay_arguments(
        parser, slurm_help="the Slurm release replayed, X.Y[.Z], as for evaluate scheduling (default: 24.11)")
    parser.add_argument("--policy", choices=("user", "hpcpredict"), default="user",
                        help="the limits jobs run under: the users' own (today's Slurm, default) or "
                             "hpcpredict's default policy for the release")
    parser.add_argument("--runs", type=int, default=32, help="forward runs per forecast (default 32)")
    parser.add_argument("--every", type=int, default=1, metavar="K",
                        help="forecast at every K-th submission only (default 1: all)")
    parser.add_argument("--spread", type=float, default=1.0,
                        help="multiply every runtime belief's log-spread by this (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="the draws' seed (default 0)")
    parser.add_argument("--no-arrivals", dest="arrivals", action="store_false",
                        help="model no later submission (the forecast before its arrivals model)")
    parser.add_argument("--no-calibration", dest="calibrate", action="store_false",
                        help="the 80 %% interval as the runs give it, not calibrated on earlier forecasts' errors")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run)


def run(args) -> int:
    from ..lab.scheduling.forecast import evaluate_forecast

    jobs, procs = read_replay(args)
    scores = evaluate_forecast(jobs, procs, policy=args.policy, risk=args.risk, slurm=args.slurm, runs=args.runs,
                               every=args.every, seed=args.seed, spread=args.spread,
                               arrivals=args.arrivals, calibrate=args.calibrate)
    if args.json:
        print(json.dumps(scores))
    else:
        _print_table(args.trace, scores)
    return 0


def _minutes(seconds) -> str:
    return "-" if seconds is None else f"{seconds / 60:.0f}"


def _share(value) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def _print_table(trace: str, scores: dict) -> None:
    from rich.table import Table

    from .common import output_console

    every = scores["sampled_every"]
    table = Table(title="Start-time forecast at each submission, against the actual start in the replay")
    table.add_column("method", no_wrap=True)
    for column in ("median |error| min", "80% coverage", "short: |error| min", "short: cov", "short n",
                   "long: |error| min", "long: cov", "long n"):
        table.add_column(column, justify="right")
    for name, label in (("hpcpredict", "hpcpredict forecast"), ("slurm", "Slurm (every job at its limit)")):
        s = scores[name]
        short, long_ = s["by_wait"]["short"], s["by_wait"]["long"]
        table.add_row(label, _minutes(s["median_abs_error_s"]), _share(s["coverage80"]),
                      _minutes(short["median_abs_error_s"]), _share(short["coverage80"]), str(short["n"]),
                      _minutes(long_["median_abs_error_s"]), _share(long_["coverage80"]), str(long_["n"]))
    console = output_console()
    console.print(table)
    policy = "users' own limits (today's Slurm)" if scores["policy"] == "user" else "hpcpredict's default policy"
    console.print(f"trace {trace}, {scores['procs']} processors")
    console.print(f"Slurm {scores['slurm_release']}, rule {scores['planning_rule']}")
    console.print(f"policy {scores['policy']}: {policy}")
    console.print(f"{scores['n']} waiting jobs forecast of {scores['n_jobs']} submitted, "
                  + ("at every submission" if every == 1 else f"at every {every}th submission")
                  + f"; {scores['runs']} runs each; spread x{scores['spread']:g}, "
                    f"user correlation {scores['correlation']:g}")
    console.print(f"short / long: waited under / from {scores['long_wait_s'] / 3600:g} h; "
                  "|error| = median absolute error, minutes; cov = share of actual starts in the 80 % interval")
    console.print(f"the forecast simplifies: {scores['simplifies']}")
