"""`hpcpredict refresh`: pull finished jobs from Slurm accounting, retrain, publish, reload.

The sysadmin's one command (cron or a systemd timer runs it nightly)::

    hpcpredict refresh                      # sacct --json for the last 7 days
    hpcpredict refresh --since 2026-11-01   # any sacct -S value
    hpcpredict refresh --sacct-json FILE    # a saved `sacct --json` dump instead of calling sacct
    hpcpredict refresh -M tetralith         # one cluster of a federation (sacct -M); jobs stored under it

Steps, each with a progress line: (1) ``sacct --json -a -S SINCE -E now`` through
:func:`run_command` (no shell, a timeout, an error carrying the command's stderr), or
pyslurm's ``pyslurm.db.Jobs.load`` when ``[accounting] source`` (or ``--source``) chooses it
(:mod:`..lab.history.accounting`: ``auto`` takes pyslurm only when it imports and matches the
Slurm release ``sacct --version`` names; the choice and why are printed), (2) parse
with the history reader and add the finished jobs to the store as source ``sacct`` (jobs
already present, e.g. reported by EpilogSlurmctld, are skipped, so nothing counts twice), (3) train the walltime model on the whole store and
publish it atomically as a new version, (4) ask the running daemon to reload (ReloadModels on
its local socket, an admin call) and print the versions it now serves.
"""
from __future__ import annotations

import logging
import time

logger = logging.getLogger(__name__)

FINAL_STATES = "CD,F,TO,CA,NF,OOM,PR,DL,BF"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "refresh", help="pull finished jobs from sacct, retrain, publish and reload the daemon (admin)")
    parser.add_argument("--since", default="now-7days", help="sacct -S value (default: now-7days)")
    parser.add_argument("-M", "--cluster", default="",
                        help="pull this cluster's jobs (sacct -M) and store them under its name")
    parser.add_argument("--cluster-model", action="store_true",
                        help="with -M: train and publish a model of this cluster's jobs only (default: the "
                             "model shared by every cluster, trained on all stored jobs)")
    parser.add_argument("--sacct-json", metavar="FILE", help="read this `sacct --json` dump instead of running sacct")
    parser.add_argument("--source", choices=("auto", "sacct", "pyslurm"),
                        help="accounting source (default: [accounting] source, auto = pyslurm when it matches "
                             "the site's Slurm, else sacct --json)")
    parser.add_argument("--sacct", default="sacct", help="sacct program (default: sacct on PATH)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds sacct may take (default 300)")
    parser.add_argument("--no-reload", action="store_true", help="publish but do not ask the daemon to reload")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=_refresh)


def run_command(cmd: list[str], *, timeout: float) -> str:
    """Run ``cmd`` (no shell) and return its stdout; CommandError on failure or timeout."""
    import subprocess

    from ..errors import CommandError

    started = time.monotonic()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                              errors="replace")
    except FileNotFoundError as error:
        raise CommandError(cmd, None, message=f"{cmd[0]} not found (is slurm-client installed?)") from error
    except subprocess.TimeoutExpired as error:
        raise CommandError(cmd, None, message=f"no answer within {timeout:.0f} s") from error
    logger.info("%s: exit %d in %.2f s", " ".join(cmd), done.returncode, time.monotonic() - started)
    if done.returncode != 0:
        raise CommandError(cmd, done.returncode, done.stdout, done.stderr)
    return done.stdout


def pull_sacct(sacct: str, since: str, timeout: float, cluster: str = "") -> str:
    on_cluster = ["-M", cluster] if cluster else []
    return run_command([sacct, "--json", "-a", *on_cluster, "-S", since, "-E", "now", "-s", FINAL_STATES],
                       timeout=timeout)


def select_source(setting: str, sacct: str, timeout: float):
    """(choice, pyslurm module or None) for ``[accounting] source = setting``.

    ``sacct --version`` runs only when pyslurm imports (its release is what pyslurm must
    match); a forced ``pyslurm`` that cannot be used raises ConfigError with the reason.
    """
    from ..errors import CommandError
    from ..lab.history.accounting import choose_source, import_pyslurm

    if setting == "sacct":
        return choose_source(setting, slurm_version=None, pyslurm_version=None), None
    module, pyslurm_error = import_pyslurm()
    pyslurm_version = slurm_version = None
    slurm_error = ""
    if module is not None:
        pyslurm_version = getattr(module, "__version__", None)
        pyslurm_error = "" if pyslurm_version else "pyslurm has no __version__"
        try:
            slurm_version = run_command([sacct, "--version"], timeout=min(timeout, 60.0))
        except CommandError as error:
            slurm_error = str(error)
    choice = choose_source(setting, slurm_version=slurm_version, pyslurm_version=pyslurm_version,
                           pyslurm_error=pyslurm_error, slurm_error=slurm_error)
    # An installed pyslurm left unused is worth a warning; no pyslurm at all is the usual case.
    log = logger.warning if module is not None and choice.name != "pyslurm" else logger.info
    log("accounting source: %s (%s)", choice.name, choice.reason)
    return choice, module if choice.name == "pyslurm" else None


def read_accounting(args, config):
    """(source label, records, choice or None): the saved dump, sacct --json or pyslurm."""
    from pathlib import Path

    from ..errors import ParseError
    from ..lab.history.pyslurm_source import load_pyslurm_jobs, records_from_pyslurm_jobs, since_timestamp
    from ..lab.history.traces import read_sacct_json

    if args.sacct_json:
        source = args.sacct_json
        try:
            text = Path(source).read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            raise ParseError(f"cannot read: {error.strerror}", source=source) from error
        return source, read_sacct_json(text, source=source), None
    choice, pyslurm = select_source(args.source or config.accounting.source, args.sacct, args.timeout)
    if pyslurm is not None:
        source = f"pyslurm -S {args.since}"
        jobs = load_pyslurm_jobs(pyslurm, since=since_timestamp(args.since), until=time.time(),
                                 cluster=args.cluster)
        return source, records_from_pyslurm_jobs(jobs, source=source), choice
    source = f"sacct -S {args.since}"
    text = pull_sacct(args.sacct, args.since, args.timeout, args.cluster)
    return source, read_sacct_json(text, source=source), choice


def finished(records):
    """Jobs with a final state and a runtime (sacct -s also lists jobs still running then)."""
    from ..records import UNKNOWN

    return [r for r in records if r.state not in ("", UNKNOWN, "RUNNING", "PENDING") and r.runtime_s >= 0]


def already_reported(store, records, cluster: str = "") -> set[str]:
    """Job ids among ``records`` the store already has on ``cluster`` (outcomes the epilog
    reported).

    Only jobs that ended in the same period are compared, so the small job ids of an old
    ingested trace (SWF numbers jobs from 1) never hide a new Slurm job.
    """
    ends = [r.end_time for r in records if r.end_time > 0]
    if not ends:
        return set()
    wanted = {r.job_id for r in records}
    return {r.job_id for r in store.iter_jobs(since_end=min(ends) - 86400)
            if r.job_id in wanted and r.cluster == cluster}


def _refresh(args) -> int:
    from dataclasses import replace

    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from .common import ask_reload, print_json, shown, socket_of, writer_config_of
    from .train import train_and_publish
    from ..store_backends import open_store

    config = writer_config_of(args)
    console = Console(stderr=True)
    result: dict = {}
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    quiet = args.json or not console.is_terminal          # progress only for a person at a terminal
    with Progress(*columns, console=console, transient=True, disable=quiet) as progress:
        step = progress.add_task("reading accounting", total=None)
        source, records, choice = read_accounting(args, config)
        if choice is not None:
            result["accounting"] = {"source": choice.name, "reason": choice.reason}
        records = finished(records)
        if args.cluster:
            records = [replace(record, cluster=args.cluster) for record in records]
        progress.update(step, description=f"storing {len(records)} finished jobs")
        store = open_store(config)
        try:
            reported = already_reported(store, records, args.cluster)
            fresh = [r for r in records if r.job_id not in reported]
            # Tagged "sacct" whichever reader made them (the records are the same), so a site that
            # switches between sacct and pyslurm never stores a job twice.
            added, present = store.add_jobs(fresh, "sacct")
            present += len(records) - len(fresh)
            pruned = store.prune_predictions(keep_days=config.store.keep_predictions_days,
                                             keep_rows=config.store.keep_predictions)
        finally:
            store.close()
        result.update(source=source, finished_jobs=len(records), added=added, already_present=present,
                      predictions_pruned=pruned)
        progress.update(step, description="training the walltime model")
        artifact, trained_on = train_and_publish(config, args.cluster if args.cluster_model and args.cluster else None)
        result.update(kind=artifact.kind, version=artifact.version, trained_on=trained_on, path=str(artifact.path))
        if not args.no_reload:
            progress.update(step, description="asking the daemon to reload")
            reply = ask_reload(socket_of(args, config))
            result["serving"] = [{"kind": m.kind, "key": m.key, "version": m.version} for m in reply.models]
            result["reload_errors"] = list(reply.errors)
            if not any((m.kind, m.key, m.version) == (artifact.kind, artifact.key, artifact.version)
                       for m in reply.models):
                result["reload_errors"].append(f"the daemon does not serve the published {artifact.kind} "
                                               f"version {artifact.version}")
    if args.json:
        print_json(result)
    else:
        if "accounting" in result:
            print(f"accounting: {'sacct --json' if choice.name == 'sacct' else 'pyslurm'} ({choice.reason})")
        print(f"{source}: {result['finished_jobs']} finished jobs, {added} new, {present} already stored")
        print(f"trained walltime model on {trained_on} jobs: published version {artifact.version}")
        for model in result.get("serving", ()):
            print(shown(f"daemon serves {model['kind']:9} {model['key']:20} {model['version']}"))
        for error in result.get("reload_errors", ()):
            print(shown(f"refused by the daemon: {error}"))
    return 1 if result.get("reload_errors") else 0
