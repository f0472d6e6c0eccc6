"""Where ``explain`` and ``report`` read the store's records: the store file itself, or the daemon.

Root and the store file's owner (the daemon's user; an admin's own test store) read the file,
as before; anyone else asks the daemon (``JobRecord`` / ``UserReport``, :mod:`hpcpredict.daemon.job_records`),
which knows the caller from the kernel (the local socket) or MUNGE (the remote listener) and
answers about the caller's own jobs. The daemon's store is private to it, so a user opening
the file could only fail ("unable to open database file"); a file a user could read anyway
(a mode left open) is still not read: the daemon's rule is the one that decides.
"""
from __future__ import annotations

import os

from ...proto.v1 import hpcpredict_pb2 as pb


def store_is_mine(config) -> bool:
    """Read the store directly? A PostgreSQL store with a DSN configured (the DSN is the
    credential); a SQLite file that exists and is root's to read or the caller's own."""
    if getattr(config.store, "backend", "sqlite") == "postgres":
        return bool(config.store.dsn)
    try:
        owner = os.stat(config.store.path).st_uid
    except OSError:
        return False
    return os.geteuid() in (0, owner) and os.access(config.store.path, os.R_OK)


def job_record(config, job_id: str, *, history: int, cluster: str | None, socket: str | None = None):
    """The daemon's answer for one job (:class:`~hpcpredict.daemon.job_records.JobRecordData`)."""
    from ..client import user_client
    from ..job_records import MAX_HISTORY, record_from_reply

    request = pb.JobRecordRequest(job_id=str(job_id), cluster=cluster or "", history=max(0, min(history, MAX_HISTORY)))
    with user_client(socket, config, timeout=30.0) as client:
        return record_from_reply(client.call("JobRecord", request))


def user_report(config, *, user, account, since, cluster, by: str, socket: str | None = None):
    """The daemon's report rows, per-group suggestions and row cap (0: every row)."""
    from ..client import user_client
    from ..job_records import report_from_reply

    request = pb.UserReportRequest(user=user or "", account=account or "", since=since or 0.0,
                                   cluster=cluster or "", by=by)
    with user_client(socket, config, timeout=60.0) as client:
        return report_from_reply(client.call("UserReport", request))
