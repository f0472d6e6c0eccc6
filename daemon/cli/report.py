"""`hpcpredict report`: per user (or account), how good the estimates were and what to ask for.

Like ``explain``: root or the store file's owner reads the store file (every user's jobs);
anyone else asks the daemon (``UserReport``), which sends the rows of the caller's own jobs
(the latest 5,000 ended ones) and refuses another user's report. pandas builds the tables and
matplotlib the plot here, from those rows, either way; neither is imported by the daemon.

Columns: ``jobs`` ended in the period; ``predicted`` of them had a model's prediction recorded
(a fallback, the request answering for want of history, is not one); ``our_accuracy`` mean
min(p, r)/max(p, r) of those predictions (p predicted, r actual runtime: the accuracy
``status`` and the metrics show, over their own windows);
``request_accuracy`` the same for the users' own requests; ``requested_h`` / ``used_h``
processor-hours asked for and used; ``killed_by_our_limit`` jobs that ended in TIMEOUT below
their user's ``--time`` (or without one) under a limit we decided or set, whatever the mode
was called: the daemon decided a ``--time-min`` or ``--time`` for it (at submission, or the
allocation answer's lower TimeLimit), and the limit it ran under, as PrologSlurmctld read it
back from slurmctld (on 22.05 backfill starts a time_min job under its time_min), was below the
request (not read back: it ended more than a minute short of the request);
``suggested_time`` the --time the group's latest job was suggested at its submission, as
stored (what its sbatch line, its job output and ``explain`` name: one answer per job); for a
latest job with none stored (history ingested from accounting), what ``hpcpredict predict``
suggests for it run again (same user, application, size, request and cluster; the same engine
and rule, :mod:`hpcpredict.daemon.suggestion`); ``suggested_basis`` (``--json``; below the
table in text) says which.
"""
from __future__ import annotations

from datetime import datetime, timezone


def register(subparsers) -> None:
    import argparse

    parser = subparsers.add_parser(
        "report", help="per user/account: accuracy of our estimates, hours requested vs used, kills, suggestions "
                       "(your own jobs; admins: any)",
        epilog=__doc__.split("\n\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--user", default=None, help="only this user")
    parser.add_argument("--account", default=None, help="only this account")
    parser.add_argument("--since", default=None, metavar="DATE", help="jobs that ended on or after DATE (now-7days, YYYY-MM-DD)")
    parser.add_argument("-M", "--cluster", default=None, help="only this cluster")
    parser.add_argument("--by", choices=("user", "account"), default="user", help="one row per user (default) or account")
    parser.add_argument("--plot", default=None, metavar="FILE", help="also draw the report (PNG/SVG/PDF by extension)")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=_report)


def parse_date(text: str) -> float:
    """``now-7days`` (now[-N{seconds|minutes|hours|days|weeks}], as ``refresh --since`` and sacct
    read it), ``YYYY-MM-DD`` or an ISO date-time (UTC unless it says otherwise) -> Unix seconds.

    >>> parse_date("2026-11-01")
    1793491200.0
    >>> import time; round(time.time() - parse_date("now-7days")) == 7 * 86400
    True
    """
    from ..errors import HpcPredictError, ParseError
    from ..lab.history.pyslurm_source import since_timestamp

    if text.strip().lower().startswith("now"):
        try:
            return since_timestamp(text)
        except ParseError:
            pass
    else:
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            pass
        else:
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            return moment.timestamp()
    raise HpcPredictError(f"--since {text!r}: expected now-N{{seconds|minutes|hours|days|weeks}} (e.g. now-7days) "
                          f"or a date YYYY-MM-DD")


def outcome_frame(store, *, user=None, account=None, since=None, cluster=None):
    """The store's ended jobs (with their prediction where recorded) as a DataFrame."""
    import pandas as pd

    from ..store import OUTCOME_COLUMNS

    rows = store.outcome_rows(user=user, account=account, since=since, cluster=cluster)
    return pd.DataFrame(rows, columns=list(OUTCOME_COLUMNS))


def summarize(jobs, *, by: str = "user", risk: float = 0.03):
    """One row per ``by`` (see the module doc for the columns), most requested hours first."""
    import numpy as np
    import pandas as pd

    columns = ["jobs", "predicted", "our_accuracy", "request_accuracy", "requested_h", "used_h",
               "killed_by_our_limit", "median_request", "suggested_time"]
    if jobs.empty:
        return pd.DataFrame(columns=columns)
    frame = jobs.copy()
    runtime = frame["runtime_s"].clip(lower=1.0)
    procs = frame["procs"].clip(lower=1)
    predicted = frame["predicted_s"].astype(float)
    has_prediction = predicted.notna() & (predicted > 0) & (frame["fallback"].fillna(1).astype(float) == 0)
    frame["our_accuracy"] = np.where(has_prediction, np.minimum(predicted, runtime) / np.maximum(predicted, runtime),
                                     np.nan)
    request = frame["requested_time_s"].astype(float)
    frame["request_accuracy"] = np.where(request > 0, np.minimum(request, runtime) / np.maximum(request, runtime),
                                         np.nan)
    frame["requested_h"] = np.where(request > 0, request * procs / 3600.0, np.nan)
    frame["used_h"] = runtime * procs / 3600.0
    frame["killed_by_our_limit"] = [int(killed(row)) for row in frame.itertuples(index=False)]
    frame["predicted"] = has_prediction.astype(int)
    frame["request"] = request.where(request > 0)
    groups = frame.groupby(by, sort=False)
    table = pd.DataFrame({
        "jobs": groups.size(),
        "predicted": groups["predicted"].sum(),
        "our_accuracy": groups["our_accuracy"].mean(),
        "request_accuracy": groups["request_accuracy"].mean(),
        "requested_h": groups["requested_h"].sum(min_count=1),
        "used_h": groups["used_h"].sum(),
        "killed_by_our_limit": groups["killed_by_our_limit"].sum(),
        "median_request": groups["request"].median(),
        "suggested_time": np.nan,     # filled by suggested_times (needs the models and the store)
    })
    return table.sort_values(["requested_h", "used_h"], ascending=False)


def killed(row) -> bool:
    """Whether one outcome row (:data:`~hpcpredict.daemon.store.OUTCOME_COLUMNS`) ended
    at a limit of ours below its user's request (:mod:`.job_limits`, the rule ``explain`` shows)."""
    from . import job_limits

    fallback = row.fallback is None or row.fallback != row.fallback or bool(row.fallback)   # None / NaN: no prediction
    decided = job_limits.ours(decided_time_min_s=row.decided_time_min_s, decided_time_limit_s=row.decided_time_limit_s,
                              allocation_time_limit_s=row.allocation_time_limit_s,
                              policy_mode=row.policy_mode if isinstance(row.policy_mode, str) else "",
                              bound_s=row.bound_s, requested_s=row.requested_time_s, fallback=fallback)
    return job_limits.killed_by_our_limit(
        state=row.state, runtime_s=row.runtime_s, requested_s=row.requested_time_s, ours=decided,
        ran_limit_s=job_limits.ran_time_limit_s(row.started_time_limit_s, row.allocation_time_limit_s))


def suggested_times(config, store, rows: list[tuple], *, by: str = "user") -> dict:
    """Per ``by`` group of ``rows`` (:data:`~hpcpredict.daemon.store.OUTCOME_COLUMNS`
    tuples, end-time order): (the suggested --time in seconds, its basis) for the group's latest
    job (:func:`hpcpredict.daemon.job_records.latest_suggestions`: the one stored at its
    submission, else the engine's answer for it run again from the published models and the
    store's recent history); groups whose latest job is no longer stored are left out."""
    from ..engine import PredictionEngine
    from ..job_records import latest_suggestions
    from ..registry import ModelRegistry
    from ..server import BUNDLED_MODELS

    engine = None

    def estimate(spec):
        nonlocal engine
        if engine is None:      # only for a job with no suggestion stored
            engine = PredictionEngine(config, store, ModelRegistry(
                config.models.dir, bundled=BUNDLED_MODELS if config.models.bundled else None))
            engine.reload()
        return engine.estimate(spec)

    return latest_suggestions(store, estimate, rows, by)


def plot_report(table, path: str, title: str, top: int = 15) -> str:
    """Hours requested vs used and accuracy (ours vs the requests) of the ``top`` rows (the
    table is sorted by hours requested); what the plot shows, in words ("the 15 users ... of
    217"). A path matplotlib cannot write (an unknown extension, a missing folder) is one
    HpcPredictError naming it."""
    import os

    import matplotlib

    from ..errors import HpcPredictError

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    extension = os.path.splitext(path)[1].lower().lstrip(".")
    formats = plt.figure().canvas.get_supported_filetypes()
    plt.close("all")
    if extension not in formats:
        raise HpcPredictError(f"--plot {path}: the extension names the format, one of "
                              f"{', '.join('.' + name for name in sorted(formats))} (e.g. report.png)")
    folder = os.path.dirname(path) or "."
    if not os.path.isdir(folder):
        raise HpcPredictError(f"--plot {path}: no folder {folder}")
    shown = table.head(top)
    rows = f"{table.index.name or 'row'}{'s' if len(table) != 1 else ''}"
    said = (f"the {len(shown)} {rows} with the most processor-hours requested, of {len(table)}"
            if len(shown) < len(table) else f"all {len(table)} {rows}")
    title = f"{title}: {said}"
    names = [str(name) for name in shown.index]
    figure, (hours, accuracy) = plt.subplots(2, 1, figsize=(11, 8), sharex=True)
    positions = range(len(shown))
    hours.bar([p - 0.2 for p in positions], shown["requested_h"].fillna(0), width=0.4, label="requested")
    hours.bar([p + 0.2 for p in positions], shown["used_h"], width=0.4, label="used")
    hours.set_ylabel("processor-hours")
    hours.set_yscale("log")
    hours.legend()
    hours.set_title(title)
    for offset, column, label in ((-0.2, "request_accuracy", "user's request"), (0.2, "our_accuracy", "hpcpredict")):
        if shown[column].isna().all():      # say so, rather than draw an empty series
            label += {"our_accuracy": " (no job here had a model's prediction)",
                      "request_accuracy": " (no job here had a request)"}[column]
        accuracy.bar([p + offset for p in positions], shown[column].fillna(0), width=0.4, label=label)
    accuracy.set_ylabel("accuracy min(p,r)/max(p,r)")
    accuracy.set_ylim(0, 1)
    accuracy.legend()
    accuracy.set_xticks(list(positions), names, rotation=45, ha="right")
    figure.tight_layout()
    try:
        figure.savefig(path, dpi=110)
    except OSError as error:
        raise HpcPredictError(f"--plot {path}: cannot write it: {error.strerror or error}") from None
    finally:
        plt.close(figure)
    return said


def _report(args) -> int:
    import json
    import math

    import pandas as pd

    from . import records_source
    from .common import config_of, print_json, print_lines
    from ..errors import HpcPredictError
    from ..store import OUTCOME_COLUMNS
    from ..timefmt import slurm_time

    config = config_of(args)
    since = parse_date(args.since) if args.since else None
    rows_cap = 0
    if records_source.store_is_mine(config):
        from ..job_records import read_report_rows
        from ..store import open_store

        store = open_store(config)
        try:
            rows = read_report_rows(store, user=args.user, account=args.account, since=since, cluster=args.cluster)
            suggestions = suggested_times(config, store, rows, by=args.by) if rows else {}
        finally:
            store.close()
    else:   # the daemon's rows, of the caller's own jobs (the plot is drawn here, from them)
        rows, suggestions, rows_cap = records_source.user_report(config, user=args.user, account=args.account,
                                                                 since=since, cluster=args.cluster, by=args.by,
                                                                 socket=getattr(args, "socket", None))
    jobs = pd.DataFrame(rows, columns=list(OUTCOME_COLUMNS))
    if jobs.empty:
        raise HpcPredictError("no ended job matches (check --user/--account/--since, or ingest history first)")
    table = summarize(jobs, by=args.by, risk=config.policy.risk)
    table["suggested_time"] = table.index.map({key: value[0] for key, value in suggestions.items()})
    table["suggested_basis"] = table.index.map({key: value[1] for key, value in suggestions.items()})
    overall = summarize(jobs.assign(everyone="all"), by="everyone", risk=config.policy.risk).iloc[0]
    if args.plot:
        what = ", ".join(f"{k} {v}" for k, v in (("user", args.user), ("account", args.account),
                                                    ("since", args.since)) if v) or "all jobs"
        plotted = plot_report(table, args.plot, f"hpcpredict report by {args.by} ({what})")
    if args.json:
        records = json.loads(table.reset_index().to_json(orient="records"))
        print_json({"by": args.by, "rows": records, "all": json.loads(overall.to_json()),
                    **({"rows_cap": rows_cap} if rows_cap else {})})
        return 0
    shown = table.drop(columns=["suggested_basis"])
    for column in ("median_request", "suggested_time"):
        shown[column] = shown[column].map(lambda s: slurm_time(int(s)) if isinstance(s, (int, float)) and
                                          not math.isnan(s) and s > 0 else "-")
    print_lines(shown.to_string(float_format=lambda v: f"{v:.2f}", na_rep="-").splitlines())   # users, applications
    bases = [basis for basis in table["suggested_basis"] if isinstance(basis, str)]
    if len(table) == 1 and bases:
        print_lines([f"suggested_time: {bases[0]}"])
    elif bases:
        stored = sum("at its submission" in basis for basis in bases)
        print(f"suggested_time: each row's latest job's, as suggested at its submission ({stored} rows); what "
              f"predict suggests for it run again where none was stored ({len(bases) - stored} rows)")
    if rows_cap:
        print(f"(the daemon sent the latest {rows_cap} ended jobs only)")
    ours = "-" if math.isnan(overall["our_accuracy"]) else f"{overall['our_accuracy']:.3f}"
    theirs = "-" if math.isnan(overall["request_accuracy"]) else f"{overall['request_accuracy']:.3f}"
    print(f"all: {int(overall['jobs'])} jobs, {int(overall['predicted'])} predicted; accuracy of our estimates "
          f"{ours}, of the requests {theirs}; processor-hours requested {overall['requested_h']:.0f}, used "
          f"{overall['used_h']:.0f}; killed under our limit: {int(overall['killed_by_our_limit'])}")
    if args.plot:
        print(f"plot written to {args.plot} ({plotted})")
    return 0
