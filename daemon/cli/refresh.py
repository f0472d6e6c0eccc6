"""`hpcpredict refresh`: pull finished jobs from Slurm accounting, retrain, publish, reload.

The sysadmin's one command (cron or a systemd timer runs it nightly)::

    hpcpredict refresh                      # sacct --json for the last 7 days
    hpcpredict refresh --since 2026-11-01   # any sacct -S value
    hpcpredict refresh --sacct-json FILE    # a saved `sacct --json` dump instead of calling sacct
    hpcpredict refresh -M tetralith         # one cluster of a federation (sacct -M); jobs stored under it

The steps are :func:`hpcpredict.daemon.lab.refresh.refresh` (accounting -> store -> train
-> publish -> reload); this module parses, shows a progress line per step and prints.
"""
from __future__ import annotations

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from .common import config_of, print_json, run_as_data_owner, shown, socket_of


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "refresh", help="pull finished jobs from sacct, retrain, publish and reload the daemon (admin)")
    # defaults: AccountingQuery's (the lab is imported when the command runs: cli/main.py)
    parser.add_argument("--since", help="sacct -S value (default: now-7days)")
    parser.add_argument("-M", "--cluster", default="",
                        help="pull this cluster's jobs (sacct -M) and store them under its name")
    parser.add_argument("--cluster-model", action="store_true",
                        help="with -M: train and publish a model of this cluster's jobs only (default: the "
                             "model shared by every cluster, trained on all stored jobs)")
    parser.add_argument("--sacct-json", metavar="FILE", help="read this `sacct --json` dump instead of running sacct")
    parser.add_argument("--source", choices=("auto", "sacct", "pyslurm"),
                        help="accounting source (default: [accounting] source, auto = pyslurm when it matches "
                             "the site's Slurm, else sacct --json)")
    parser.add_argument("--sacct", help="sacct program (default: sacct on PATH)")
    parser.add_argument("--timeout", type=float, help="seconds sacct may take (default 300)")
    parser.add_argument("--no-reload", action="store_true", help="publish but do not ask the daemon to reload")
    parser.add_argument("--force", action="store_true",
                        help="publish even when the new model is worse than the serving one on the jobs that "
                             "ended since that one was trained (the new jobs are stored either way)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=_refresh)


def _refresh(args) -> int:
    from ..lab.refresh import AccountingQuery, refresh

    config = config_of(args)
    run_as_data_owner(config)
    given = {name: getattr(args, name) for name in ("since", "sacct", "timeout") if getattr(args, name) is not None}
    query = AccountingQuery(cluster=args.cluster, sacct_json=args.sacct_json or "", source=args.source or "", **given)
    console = Console(stderr=True)
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    quiet = args.json or not console.is_terminal          # progress only for a person at a terminal
    with Progress(*columns, console=console, transient=True, disable=quiet) as progress:
        step = progress.add_task("", total=None)
        report = refresh(config, query, cluster_model=args.cluster_model,
                         socket_path=None if args.no_reload else socket_of(args, config),
                         progress=lambda description: progress.update(step, description=description),
                         force=args.force)
    if args.json:
        print_json(report.as_dict())
    else:
        if report.accounting is not None:
            shown_source = "sacct --json" if report.accounting.name == "sacct" else "pyslurm"
            print(f"accounting: {shown_source} ({report.accounting.reason})")
        print(f"{report.source}: {report.finished_jobs} finished jobs, {report.added} new, "
              f"{report.already_present} already stored")
        print(f"trained walltime model on {report.trained_on} jobs: published version {report.artifact.version}")
        for kind, key, version in report.serving or ():
            print(shown(f"daemon serves {kind:9} {key:20} {version}"))
        for error in report.reload_errors:
            print(shown(f"refused by the daemon: {error}"))
    return 1 if report.reload_errors else 0
