"""`hpcpredict ingest TRACE`: load job history (SWF, sacct --json, sacct -P, sacct-like CSV)."""
from __future__ import annotations

import os
from dataclasses import replace

from rich.progress import Progress

from .common import config_of, reload_daemon, run_as_data_owner, socket_of
from ..store import open_store


def register(subparsers) -> None:
    parser = subparsers.add_parser("ingest", help="load job history into the store")
    parser.add_argument("traces", nargs="+", metavar="TRACE")
    parser.add_argument("--format", choices=("swf", "sacct-json", "sacct-parsable", "sacct-csv"),
                        help="default: detected from the content")
    parser.add_argument("-M", "--cluster", default="", help="the cluster these jobs ran on (default: none named)")
    parser.add_argument("--no-reload", action="store_true", help="do not ask a running daemon to reload")
    parser.set_defaults(handler=_ingest)


def _ingest(args) -> int:
    from ..lab.history import read_trace   # the lab where it runs (cli/main.py)

    config = config_of(args)
    run_as_data_owner(config)
    store = open_store(config)
    total_added = 0
    try:
        with Progress(transient=True) as progress:
            task = progress.add_task("ingesting", total=len(args.traces))
            for path in args.traces:
                records = read_trace(path, args.format)
                if args.cluster:
                    records = [replace(record, cluster=args.cluster) for record in records]
                source = f"{args.format or 'trace'}:{os.path.basename(path)}"
                added, present = store.add_jobs(records, source)
                total_added += added
                progress.console.print(f"{path}: {added} jobs added, {present} already present")
                progress.advance(task)
    finally:
        store.close()
    if total_added and not args.no_reload:
        reload_daemon(socket_of(args, config))
    return 0

