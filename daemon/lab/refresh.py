"""The refresh pipeline: accounting -> store -> train -> publish -> reload, in one function.

``hpcpredict refresh`` (cron or a systemd timer runs it nightly) and ``hpcpredict train`` call
:func:`refresh` and :func:`train_and_publish`; the CLI only parses and prints. Steps:

1. read finished jobs: a saved ``sacct --json`` dump, ``sacct --json -a -S SINCE -E now``
   through :func:`~hpcpredict.daemon.commands.run_command`, or pyslurm's
   ``pyslurm.db.Jobs.load`` when ``[accounting] source`` chooses it
   (:mod:`hpcpredict.daemon.lab.history.accounting`: ``auto`` takes pyslurm only when it imports
   and matches the Slurm release ``sacct --version`` names);
2. add them to the store as source ``sacct`` (jobs already present, e.g. reported by
   EpilogSlurmctld, are skipped, so nothing counts twice) and prune old predictions;
3. train the walltime model on the same store, replaying it at ``[policy] risk`` (the risk the
   daemon answers at: the model's adaptive offset is learnt at that risk), and publish it
   atomically as a new version;
4. ask the running daemon to reload (ReloadModels on its local socket, an admin call).
"""
from __future__ import annotations

import logging
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from ..client import reload_models
from ..commands import run_command
from ..errors import CommandError, HpcPredictError, ParseError
from .history.accounting import SourceChoice, choose_source, import_pyslurm
from ..history.model import HpcPredictModel
from ..history.persist import save_model
from .history.pyslurm_source import load_pyslurm_jobs, records_from_pyslurm_jobs, since_timestamp
from .history.traces import read_sacct_json
from ..model_kinds import SITE_KEY
from ..records import UNKNOWN, JobRecord
from ..registry import Artifact, ModelRegistry
from ..store import Store
from ..store_backends import open_store
from .history.training import train_from_store

logger = logging.getLogger(__name__)

FINAL_STATES = "CD,F,TO,CA,NF,OOM,PR,DL,BF"


@dataclass(frozen=True)
class AccountingQuery:
    """Where the finished jobs come from (``hpcpredict refresh``'s options)."""
    since: str = "now-7days"        # sacct -S value
    cluster: str = ""               # sacct -M: this cluster's jobs, stored under its name
    sacct_json: str = ""            # a saved `sacct --json` dump instead of calling sacct
    source: str = ""                # auto | sacct | pyslurm; "": [accounting] source
    sacct: str = "sacct"            # the sacct program
    timeout: float = 300.0          # seconds sacct may take


@dataclass
class RefreshReport:
    """What one refresh did (``hpcpredict refresh --json`` prints it as a dict)."""
    source: str
    finished_jobs: int
    added: int
    already_present: int
    predictions_pruned: int
    artifact: Artifact
    trained_on: int
    accounting: SourceChoice | None = None
    serving: list[tuple[str, str, str]] | None = None   # (kind, key, version); None: no reload asked
    reload_errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        result = {"source": self.source, "finished_jobs": self.finished_jobs, "added": self.added,
                  "already_present": self.already_present, "predictions_pruned": self.predictions_pruned,
                  "kind": self.artifact.kind, "version": self.artifact.version, "trained_on": self.trained_on,
                  "path": str(self.artifact.path)}
        if self.accounting is not None:
            result["accounting"] = {"source": self.accounting.name, "reason": self.accounting.reason}
        if self.serving is not None:
            result["serving"] = [{"kind": k, "key": key, "version": v} for k, key, v in self.serving]
            result["reload_errors"] = list(self.reload_errors)
        return result


def pull_sacct(sacct: str, since: str, timeout: float, cluster: str = "") -> str:
    on_cluster = ["-M", cluster] if cluster else []
    return run_command([sacct, "--json", "-a", *on_cluster, "-S", since, "-E", "now", "-s", FINAL_STATES],
                       timeout=timeout)


def select_source(setting: str, sacct: str, timeout: float):
    """(choice, pyslurm module or None) for ``[accounting] source = setting``.

    ``sacct --version`` runs only when pyslurm imports (its release is what pyslurm must
    match); a forced ``pyslurm`` that cannot be used raises ConfigError with the reason.
    """
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


def read_accounting(query: AccountingQuery, config) -> tuple[str, list[JobRecord], SourceChoice | None]:
    """(source label, records, choice or None): the saved dump, sacct --json or pyslurm."""
    if query.sacct_json:
        source = query.sacct_json
        try:
            text = Path(source).read_text(encoding="utf-8", errors="replace")
        except OSError as error:
            raise ParseError(f"cannot read: {error.strerror}", source=source) from error
        return source, read_sacct_json(text, source=source), None
    choice, pyslurm = select_source(query.source or config.accounting.source, query.sacct, query.timeout)
    if pyslurm is not None:
        source = f"pyslurm -S {query.since}"
        jobs = load_pyslurm_jobs(pyslurm, since=since_timestamp(query.since), until=time.time(),
                                 cluster=query.cluster)
        return source, records_from_pyslurm_jobs(jobs, source=source), choice
    source = f"sacct -S {query.since}"
    text = pull_sacct(query.sacct, query.since, query.timeout, query.cluster)
    return source, read_sacct_json(text, source=source), choice


def finished(records):
    """Jobs with a final state and a runtime (sacct -s also lists jobs still running then)."""
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


def train_walltime(store: Store, config, cluster: str | None = None) -> tuple[HpcPredictModel, int]:
    """The walltime model fit on ``store`` (of ``cluster``), replayed at ``[policy] risk``: the
    risk the daemon answers at, so the adaptive offset it learns is the one it serves with."""
    model, count = train_from_store(store, risk=config.policy.risk, cluster=cluster)
    if not count:
        on = f" of cluster {cluster}" if cluster is not None else ""
        raise HpcPredictError(f"the store has no job history{on}: run `hpcpredict ingest TRACE` first")
    return model, count


def publish_walltime(config, model: HpcPredictModel, count: int, cluster: str | None = None) -> Artifact:
    """Publish ``model`` as a new walltime version (``cluster``'s own model, or the site's)."""
    registry = ModelRegistry(config.models.dir, owner=config.models.owner,
                             keep_versions=config.models.keep_versions)
    with tempfile.TemporaryDirectory() as tmp:
        save_model(model, Path(tmp))
        key = SITE_KEY if cluster is None else cluster
        return registry.publish("walltime", tmp, key=key, metadata={"jobs": count})


def train_and_publish(config, cluster: str | None = None) -> tuple[Artifact, int]:
    """Train the walltime model on every stored job (of ``cluster``: then published as that
    cluster's own model) and publish it; the Artifact and the number of jobs."""
    store = open_store(config)
    try:   # streamed from the store: memory does not grow with the history
        model, count = train_walltime(store, config, cluster)
    finally:
        store.close()
    return publish_walltime(config, model, count, cluster), count


def refresh(config, query: AccountingQuery, *, cluster_model: bool = False, socket_path: str | None = None,
            progress: Callable[[str], None] = lambda step: None) -> RefreshReport:
    """Read the finished jobs of ``query``, store them, train and publish the walltime model
    (``cluster_model``: of ``query.cluster``'s jobs only, published for it), and with
    ``socket_path`` ask the daemon there to reload. ``progress`` hears each step's name."""
    progress("reading accounting")
    source, records, choice = read_accounting(query, config)
    records = finished(records)
    if query.cluster:
        records = [replace(record, cluster=query.cluster) for record in records]
    progress(f"storing {len(records)} finished jobs")
    trained_cluster = query.cluster if cluster_model and query.cluster else None
    store = open_store(config)
    try:
        reported = already_reported(store, records, query.cluster)
        fresh = [r for r in records if r.job_id not in reported]
        # Tagged "sacct" whichever reader made them (the records are the same), so a site that
        # switches between sacct and pyslurm never stores a job twice.
        added, present = store.add_jobs(fresh, "sacct")
        present += len(records) - len(fresh)
        pruned = store.prune_predictions(keep_days=config.store.keep_predictions_days,
                                         keep_rows=config.store.keep_predictions)
        progress("training the walltime model")
        try:
            model, trained_on = train_walltime(store, config, trained_cluster)
        except HpcPredictError as error:
            if records:
                raise
            # An empty cluster: say what accounting returned, not "ingest a trace" (nothing is wrong).
            raise HpcPredictError(f"{source} returned 0 finished jobs and the store has no job history"
                                  f"{f' of cluster {trained_cluster}' if trained_cluster else ''} yet: nothing to "
                                  f"train on; run refresh again once jobs have ended (or `hpcpredict ingest "
                                  f"TRACE` to start from a trace)") from error
    finally:
        store.close()
    artifact = publish_walltime(config, model, trained_on, trained_cluster)
    report = RefreshReport(source=source, finished_jobs=len(records), added=added, already_present=present,
                           predictions_pruned=pruned, artifact=artifact, trained_on=trained_on,
                           accounting=choice)
    if socket_path is not None:
        progress("asking the daemon to reload")
        reply = reload_models(socket_path)
        report.serving = [(m.kind, m.key, m.version) for m in reply.models]
        report.reload_errors = list(reply.errors)
        if (artifact.kind, artifact.key, artifact.version) not in report.serving:
            report.reload_errors.append(f"the daemon does not serve the published {artifact.kind} "
                                        f"version {artifact.version}")
    return report
