"""The attacks of the reliability table, each on a fresh daemon, each returning its numbers.

Every attack uses only what an unprivileged local user has: the public gRPC socket and valid
(if large) requests. The fault attacks also need what root has in a test: a tmpfs to fill.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import time

import grpc

from hpcpredict.proto.v1 import hpcpredict_pb2 as pb

from .target import Target, probe_latency


def _job(user: str = "mallory", **fields) -> pb.JobRequest:
    return pb.JobRequest(job=pb.JobIdentity(user=user, application="lmp"), time_limit_s=3600,
                         resources=pb.Resources(nodes=1, ntasks=4), **fields)


def _script(index: int, size: int) -> bytes:
    head = f"#!/bin/bash\n#HPCPREDICT size={index}\nsrun lmp -in in.{index}\n".encode()
    return head + b"# padding\n" * ((size - len(head)) // 10)


def _codes(calls) -> dict[str, int]:
    codes: dict[str, int] = {}
    for call in calls:
        try:
            call()
            code = "OK"
        except grpc.RpcError as error:
            code = error.code().name
        codes[code] = codes.get(code, 0) + 1
    return codes


def distinct_scripts(target: Target, count: int = 400, size: int = 1 << 20) -> dict:
    """Finding 3a: distinct 1 MiB scripts and the parse cache."""
    rss0 = target.rss_mib()
    codes = _codes([lambda i=i: target.stub.Predict(_job(script=_script(i, size)), timeout=60) for i in range(count)])
    time.sleep(1)
    return {"requests": count, "script_bytes": size, "codes": codes, "rss_before_mib": rss0,
            "rss_after_mib": target.rss_mib(), "rss_growth_mib": round(target.rss_mib() - rss0, 1),
            "fds": target.fds(), **probe_latency(target)}


def big_environments(target: Target, count: int = 20, variables: int = 900, value_bytes: int = 4000) -> dict:
    """Finding 3b: environment maps of ~3.5 MiB (all a 4 MiB gRPC message holds)."""
    rss0, store0 = target.rss_mib(), target.store_mib()

    def call(index: int):
        request = _job()
        request.environment.update({f"V{index}_{i}": "e" * value_bytes for i in range(variables)})
        target.stub.Predict(request, timeout=60)

    codes = _codes([lambda i=i: call(i) for i in range(count)])
    time.sleep(2)
    return {"requests": count, "environment_bytes": variables * value_bytes, "codes": codes,
            "rss_growth_mib": round(target.rss_mib() - rss0, 1),
            "store_growth_mib": round(target.store_mib() - store0, 2), **probe_latency(target)}


def stored_per_request(target: Target, count: int = 100) -> dict:
    """Finding 3c: what the store keeps of requests that every version accepts (a 1 MiB script
    and 200 environment variables of 3 kB each: within the new limits too)."""
    store0 = target.store_mib()

    def call(index: int):
        request = _job(script=_script(index, 1 << 20))
        request.environment.update({f"V{i}": "s" * 3000 for i in range(200)})
        target.stub.Predict(request, timeout=60)

    started = time.monotonic()
    codes = _codes([lambda i=i: call(i) for i in range(count)])
    seconds = time.monotonic() - started
    time.sleep(2)
    grown = target.store_mib() - store0
    return {"requests": count, "request_bytes": (1 << 20) + 200 * 3002, "codes": codes,
            "store_growth_mib": round(grown, 2), "stored_kib_per_request": round(grown * 1024 / count, 1),
            "store_mib_per_minute_at_this_rate": round(grown / seconds * 60, 1)}


_EXPAND = """
import json, resource, sys, time
from hpcpredict.topology.hostlist import expand
started = time.monotonic()
try:
    outcome = f"expanded {len(expand(sys.argv[1]))} names"
except Exception as error:
    outcome = f"refused: {type(error).__name__}"
print(json.dumps({"outcome": outcome, "seconds": round(time.monotonic() - started, 2),
                  "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))
"""


def padded_hostlist(target: Target, hosts: int = 2_000_000) -> dict:
    """Finding 5: a zero-padded node list (before: counted as one name, so let through).

    Two places: the daemon's request guard (PredictAtAllocation: refused or let through), and
    the expansion the daemon does at allocation when a placement and a communication model are
    served (``topology.hostlist.expand``, run in a child process of the same code to time it
    and read its peak memory)."""
    import json
    import subprocess
    import sys

    node_list = f"n[0000000000000000-{hosts - 1:016d}]"
    codes = _codes([lambda: target.stub.PredictAtAllocation(
        pb.AllocationRequest(request=_job(), job_id="1", node_list=node_list), timeout=300)])
    child = subprocess.run([sys.executable, "-c", _EXPAND, node_list], env=target.env, capture_output=True,
                           text=True, timeout=600)
    expansion = json.loads(child.stdout) if child.returncode == 0 else {"error": child.stderr[-300:]}
    return {"node_list": node_list, "names": hosts, "bytes": len(node_list), "guard": codes,
            "expand_outcome": expansion.get("outcome"), "seconds": expansion.get("seconds"),
            "peak_rss_mib": expansion.get("peak_rss_mib")}


def _tmpfs(path) -> bool:
    path.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(path)],
                          capture_output=True).returncode == 0


def _fill(directory) -> None:
    with open(directory / "filler", "wb") as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass


def disk_full_faults(make_target, rounds: int = 20) -> dict:
    """Finding 7a: with the disk full, do successful Predicts hide the outcome fault, and does
    a fault clearing reload the models?"""
    import tempfile
    from pathlib import Path

    base = Path(tempfile.mkdtemp(prefix="hpd-rel-fs-", dir="/tmp"))
    small = base / "small"
    if not _tmpfs(small):
        shutil.rmtree(base, ignore_errors=True)
        return {"skipped": "cannot mount a tmpfs (needs root)"}
    target = make_target({"HPCPREDICT_STORE_PATH": str(small / "hpcpredict.sqlite"),
                          "HPCPREDICT_STORE_JOURNAL_MIB": "0"})
    try:
        outcome = pb.Outcome(job_id="ok-0", elapsed_s=60, state="COMPLETED", end_time=1_700_000_000, request=_job())
        target.stub.ReportOutcome(outcome, timeout=10)
        loads0 = target.model_loads()
        _fill(small)
        seen = 0
        for index in range(rounds):
            target.stub.Predict(_job(), timeout=10)
            try:
                target.stub.ReportOutcome(pb.Outcome(job_id=f"full-{index}", elapsed_s=60, state="COMPLETED",
                                                     end_time=1_700_000_000, request=_job()), timeout=10)
            except grpc.RpcError:
                pass
            target.stub.Predict(_job(), timeout=10)   # a successful call after the failed one
            seen += "store" in target.faults()
        (small / "filler").unlink()
        time.sleep(2)
        for index in range(5):
            try:
                target.stub.Predict(_job(), timeout=10)
                target.stub.ReportOutcome(pb.Outcome(job_id=f"freed-{index}", elapsed_s=60, state="COMPLETED",
                                                     end_time=1_700_000_000, request=_job()), timeout=10)
            except grpc.RpcError:
                time.sleep(1)
        time.sleep(1)
        return {"scrapes_showing_the_fault": f"{seen} of {rounds}", "reloads_after_clearing": target.model_loads() - loads0}
    finally:
        target.cleanup()
        subprocess.run(["umount", "-l", str(small)], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def deleted_models_dir(make_target) -> dict:
    """Finding 7b: the models directory deleted under the running daemon, then a reload (SIGHUP)."""
    import tempfile
    from pathlib import Path

    from hpcpredict.daemon.registry import ModelRegistry
    from hpcpredict.topology.placement import Placement

    target = make_target({})
    try:
        folder = Path(tempfile.mkdtemp(prefix="hpd-rel-model-"))
        Placement(kind="tree", levels=("leaf",), paths={f"n{i}": (f"s{i // 4}",) for i in range(16)}
                  ).save(folder / "topology.json")
        ModelRegistry(target.data_dir / "models").publish("topology", folder)
        shutil.rmtree(folder)
        loads = target.model_loads()
        target.proc.send_signal(signal.SIGHUP)
        _wait(lambda: target.model_loads() > loads)
        shutil.rmtree(target.data_dir / "models")
        loads = target.model_loads()
        target.proc.send_signal(signal.SIGHUP)
        _wait(lambda: target.model_loads() > loads)
        return {"fault_reported": "models" in target.faults()}
    finally:
        target.cleanup()


def _wait(predicate, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.1)


def file_modes(target: Target) -> dict:
    """Finding 8: the modes the daemon's files get under the runner's umask."""
    target.stub.Predict(_job(), timeout=10)
    time.sleep(1)
    modes = {p.name: f"{stat.S_IMODE(p.stat().st_mode):04o}" for p in sorted(target.data_dir.glob("hpcpredict.sqlite*"))}
    umask = os.umask(0)
    os.umask(umask)
    return {"umask": f"{umask:04o}", "modes": modes,
            "world_readable": sorted(name for name, mode in modes.items() if int(mode, 8) & 0o004)}


def publish_as_root(make_target) -> dict:
    """Finding 9 / site issue: root publishes (as the guide's cron line does) for a daemon that
    runs as its own unprivileged user. Does the daemon serve it, and what does the command say?"""
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from hpcpredict.topology.placement import Placement

    target = make_target({}, "nobody")
    folder = Path(tempfile.mkdtemp(prefix="hpd-rel-model-"))   # 0700, root's: as `train` leaves it
    try:
        Placement(kind="tree", levels=("leaf",), paths={f"n{i}": (f"s{i // 4}",) for i in range(16)}
                  ).save(folder / "topology.json")
        done = subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "publish", "topology", str(folder)],
                              env=target.env, capture_output=True, text=True, timeout=120)
        time.sleep(1)
        return {"exit_code": done.returncode, "said": (done.stderr.strip().splitlines() or [""])[-1][:200],
                "daemon_fault": "models" in target.faults(),
                "serving_published": "topology" in target.served_kinds()}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        target.cleanup()


_FLOOD = """
import json, sys, time
from hpcpredict.daemon.client import DaemonClient
from hpcpredict.daemon.errors import HpcPredictError
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
script = sys.stdin.buffer.read()
seconds, answered, with_id, refused = float(sys.argv[2]), 0, 0, 0
request = pb.JobRequest(job=pb.JobIdentity(application="lmp"), script=script,
                        resources=pb.Resources(nodes=2, ntasks=8), time_limit_s=3600)
deadline = time.monotonic() + seconds
with DaemonClient(sys.argv[1], timeout=30) as client:
    while time.monotonic() < deadline:
        try:
            answer = client.predict(request)
        except HpcPredictError:   # "busy": the daemon's fairness, not the store; ask again
            refused += 1
            continue
        answered += answer.runtime_s > 0
        with_id += bool(answer.prediction_id)
print(json.dumps({"answered": answered, "with_prediction_id": with_id, "refused_busy": refused}))
"""


def predict_flood(target: Target, seconds: float = 60.0, outcomes: int = 50) -> dict:
    """Finding 4: one ordinary user sends valid Predicts (a 60 KB script each: stored whole,
    under the 64 KiB stored_request_bytes) over the local socket as fast as it can for
    ``seconds``; then the hooks (root) report ``outcomes`` outcomes of another user. Store
    growth (SQLite file + WAL, after the journal is committed) and how many outcomes were stored."""
    import pwd
    import sqlite3
    import sys
    import uuid

    name = f"hpdf{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
    try:
        user = pwd.getpwnam(name)
        store0 = target.store_mib()
        script = _script(0, 60_000)
        done = subprocess.run([sys.executable, "-c", _FLOOD, target.info["hook_socket"], str(seconds)], input=script,
                              capture_output=True, user=user.pw_uid, group=user.pw_gid, extra_groups=[],
                              env={"HOME": "/tmp", "PATH": "/usr/bin:/bin"}, cwd="/tmp", timeout=seconds + 120)
        flood = json.loads(done.stdout) if done.returncode == 0 else {"error": done.stderr.decode()[-300:]}
        stored = 0
        for index in range(outcomes):
            try:
                stored += target.stub.ReportOutcome(pb.Outcome(
                    job_id=f"bob-{index}", elapsed_s=600, state="COMPLETED", end_time=1_700_000_000,
                    request=_job(user="bob")), timeout=30).stored
            except grpc.RpcError:
                pass
        time.sleep(3)   # the journal's last batch
        files = {suffix: (target.data_dir / f"hpcpredict.sqlite{suffix}") for suffix in ("", "-wal")}
        sizes = {suffix: round(path.stat().st_size / 2**20, 2) if path.exists() else 0.0
                 for suffix, path in files.items()}
        db = sqlite3.connect(f"file:{target.data_dir / 'hpcpredict.sqlite'}?mode=ro", uri=True)
        try:
            rows, kept = db.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(request)), 0) FROM predictions "
                                    "WHERE user = ?", (name,)).fetchone()
        finally:
            db.close()
        return {"seconds": seconds, "script_bytes": len(script), **flood,
                "store_before_mib": store0, "store_after_mib": target.store_mib(),
                "store_growth_mib": round(target.store_mib() - store0, 2),
                "sqlite_file_mib": sizes[""], "wal_mib": sizes["-wal"],
                "flooders_rows_kept": rows, "flooders_request_mib_kept": round(kept / 2**20, 2),
                "other_users_outcomes": outcomes, "other_users_outcomes_stored": stored, **probe_latency(target)}
    finally:
        subprocess.run(["userdel", name], capture_output=True)
