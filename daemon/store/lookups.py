"""What people look up in the store: one job's record (``explain``), per-user outcomes
(``report``), accuracy per partition (metrics).

A mixin of the store backends: plain SQL (``?`` placeholders) run through the backend's
``_read(sql, params) -> list[tuple]``, so every backend answers the same questions the same
way. The column ``user`` is always written quoted: in PostgreSQL a bare ``user`` is the
session's user name, not the column. None of this is on the prediction path: ``explain`` and ``report`` read it directly (an admin
on the controller) or through the daemon's JobRecord / UserReport (:mod:`.job_records`); the
accuracy gauges run one aggregate query per scrape.
"""
from __future__ import annotations

from ..records import JobRecord
from .rows import JOB_COLUMNS, PREDICTION_COLUMNS, job_from_row, prediction_from_values, quoted

#: Columns of a job row as :meth:`StoreLookups.job_rows` returns them (dict keys).
JOB_ROW_COLUMNS = ("cluster", "source", "job_id", "user", "grp", "account", "partition", "qos", "application", "job_name",
                   "nodes", "requested_procs", "allocated_procs", "requested_time_s", "submit_time", "start_time",
                   "end_time", "runtime_s", "state", "exit_code", "inputs", "prediction_id", "node_list")
#: Columns of :meth:`StoreLookups.outcome_rows` (one row per ended job, its prediction if any):
#: then the limits the linked prediction decided and its mode, and from the job's latest
#: allocation prediction the TimeLimit it decided and what PrologSlurmctld read back
#: (:mod:`hpcpredict.daemon.cli.job_limits`).
OUTCOME_COLUMNS = ("cluster", "job_id", "source", "user", "account", "partition", "state", "procs", "requested_time_s",
                   "runtime_s", "submit_time", "end_time", "predicted_s", "bound_s", "fallback", "model_version",
                   "decided_time_limit_s", "decided_time_min_s", "policy_mode", "allocation_time_limit_s",
                   "started_time_limit_s", "started_time_min_s", "suggested_time_limit_s")
#: The job's latest allocation prediction (same job, cluster and user, made after its submission)
_ALLOCATION_ROW = ("SELECT x.prediction_id FROM predictions x WHERE x.job_id = j.job_id AND x.cluster = j.cluster "
                   "AND x.stage = 'allocation' AND x.\"user\" = j.\"user\" AND x.created >= j.submit_time "
                   "ORDER BY x.created DESC LIMIT 1")


class StoreLookups:
    """Read-only questions about single jobs and groups of jobs (see the module doc)."""

    def _read(self, sql: str, params=()) -> list:   # provided by the backend
        raise NotImplementedError

    def job_rows(self, job_id: str, cluster: str | None = None) -> list[dict]:
        """Every stored row of ``job_id`` on ``cluster`` (None: any; an ingested trace and a
        reported outcome may both hold it), oldest first."""
        on_cluster, params = ("", (str(job_id),)) if cluster is None else (" AND cluster = ?", (str(job_id), cluster))
        rows = self._read(f"SELECT {quoted(JOB_ROW_COLUMNS)} FROM jobs WHERE job_id = ?{on_cluster} "
                          "ORDER BY stored_at, id", params)
        return [dict(zip(JOB_ROW_COLUMNS, row)) for row in rows]

    def job_predictions(self, job_id: str, prediction_ids=(), cluster: str | None = None) -> list:
        """Predictions recorded for ``job_id`` (on ``cluster``; None: any) or named by
        ``prediction_ids`` (a submission is predicted before Slurm gives the job its id), in
        creation order."""
        self.flush_pending()
        ids = [i for i in dict.fromkeys(prediction_ids) if i]
        where, params = "job_id = ?", [str(job_id)]
        if cluster is not None:
            where, params = "(job_id = ? AND cluster = ?)", [str(job_id), cluster]
        if ids:
            where += f" OR prediction_id IN ({', '.join('?' * len(ids))})"
        rows = self._read(f"SELECT {quoted(PREDICTION_COLUMNS)} FROM predictions WHERE {where} ORDER BY created",
                          (*params, *ids))
        return [prediction_from_values(row) for row in rows]

    def user_history(self, user: str, before: float, limit: int = 10) -> list[JobRecord]:
        """The ``limit`` last jobs of ``user`` that ended before ``before``, oldest first."""
        rows = self._read(f'SELECT {quoted(JOB_COLUMNS)} FROM jobs WHERE "user" = ? AND end_time >= 0 '
                          "AND end_time < ? ORDER BY end_time DESC, id DESC LIMIT ?", (user, before, int(limit)))
        return [job_from_row(row) for row in reversed(rows)]

    def outcome_rows(self, *, user: str | None = None, account: str | None = None,
                     since: float | None = None, cluster: str | None = None, limit: int | None = None) -> list[tuple]:
        """Ended jobs (runtime known) with their prediction where one was recorded, as tuples
        ordered as :data:`OUTCOME_COLUMNS` (the prediction's and the allocation row's columns are
        None for a job without one), in end-time order; ``limit``: only the latest so many."""
        self.flush_pending()
        where, params = ["j.runtime_s >= 0"], []
        for clause, value in (('j."user" = ?', user), ("j.account = ?", account), ("j.end_time >= ?", since),
                              ("j.cluster = ?", cluster)):
            if value is not None:
                where.append(clause)
                params.append(value)
        return self._read(
            'SELECT j.cluster, j.job_id, j.source, j."user", j.account, j.partition, j.state, '
            "CASE WHEN j.requested_procs > 0 THEN j.requested_procs ELSE j.allocated_procs END, "
            "j.requested_time_s, j.runtime_s, j.submit_time, j.end_time, p.runtime_s, p.bound_s, p.fallback, "
            "p.model_version, p.decided_time_limit_s, p.decided_time_min_s, p.policy_mode, a.decided_time_limit_s, "
            "a.started_time_limit_s, a.started_time_min_s, p.suggested_time_limit_s "
            "FROM jobs j LEFT JOIN predictions p ON p.prediction_id = j.prediction_id AND j.prediction_id != '' "
            f"LEFT JOIN predictions a ON a.prediction_id = ({_ALLOCATION_ROW}) "
            f"WHERE {' AND '.join(where)} ORDER BY j.end_time DESC, j.id DESC"
            + ("" if limit is None else f" LIMIT {int(limit)}"), tuple(params))[::-1]

    def partition_accuracy(self, last: int = 200, since: float = 0.0) -> dict[str, dict[str, float]]:
        """Per partition, over its last ``last`` outcomes that ended at or after ``since`` and
        had a (non-fallback) prediction: mean accuracy min(p, r)/max(p, r), the share
        under-predicted (p < r), the share killed at its limit (TIMEOUT), how many jobs."""
        self.flush_pending()
        rows = self._read(
            "SELECT partition, p_runtime, runtime_s, state FROM ("
            " SELECT j.partition AS partition, p.runtime_s AS p_runtime, j.runtime_s AS runtime_s, j.state AS state,"
            " ROW_NUMBER() OVER (PARTITION BY j.partition ORDER BY j.end_time DESC, j.id DESC) AS recent"
            " FROM jobs j JOIN predictions p ON p.prediction_id = j.prediction_id"
            " WHERE j.end_time >= ? AND j.source = 'outcome' AND j.runtime_s > 0 AND p.runtime_s > 0"
            " AND p.fallback = 0) ranked WHERE recent <= ?", (float(since), int(last)))
        totals: dict[str, list[float]] = {}
        for partition, predicted, runtime, state in rows:
            entry = totals.setdefault(partition, [0.0, 0.0, 0.0, 0.0])
            entry[0] += min(predicted, runtime) / max(predicted, runtime)
            entry[1] += predicted < runtime
            entry[2] += state == "TIMEOUT"
            entry[3] += 1
        return {partition: {"accuracy": a / n, "under_rate": u / n, "kill_rate": k / n, "n": n}
                for partition, (a, u, k, n) in totals.items()}

    def counts(self) -> dict[str, int]:
        self.flush_pending()
        jobs = self._read("SELECT COUNT(*), COALESCE(SUM(CASE WHEN source = 'outcome' THEN 1 ELSE 0 END), 0) "
                          "FROM jobs")[0]
        predictions = self._read("SELECT COUNT(*) FROM predictions")[0][0]
        return {"jobs": int(jobs[0]), "outcomes": int(jobs[1]), "predictions": int(predictions)}

    def recent_accuracy(self, last: int = 100) -> dict[str, float]:
        """Over the last ``last`` outcomes a model predicted (a fallback, the request answering
        for want of history, is not counted: the same rule as the metrics' and ``report``'s
        accuracy): ``accuracy`` mean min(p, r)/max(p, r); ``bound_exceeded_rate`` the share of
        those not killed at their limit that ran past the bound; ``n`` how many."""
        self.flush_pending()
        rows = self._read(
            "SELECT p.runtime_s, p.bound_s, j.runtime_s, j.state FROM jobs j JOIN predictions p "
            "ON p.prediction_id = j.prediction_id WHERE j.source = 'outcome' AND j.runtime_s > 0 "
            "AND p.runtime_s > 0 AND p.fallback = 0 ORDER BY j.end_time DESC LIMIT ?", (last,))
        if not rows:
            return {}
        accuracy = sum(min(p, r) / max(p, r) for p, _, r, _ in rows) / len(rows)
        finished = [(b, r) for _, b, r, state in rows if state != "TIMEOUT"]
        killed = sum(1 for b, r in finished if r > b) / len(finished) if finished else 0.0
        return {"accuracy": accuracy, "bound_exceeded_rate": killed, "n": float(len(rows))}

    def flush_pending(self) -> None:
        """Commit the predictions a backend still holds back (its journal), so lookups see them."""
        flush = getattr(self, "flush", None)
        if flush is not None:
            flush()
