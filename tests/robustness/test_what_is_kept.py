"""What the daemon keeps and creates, attacked from an ordinary user's side: a flood of valid
Predicts against the per-user budget, a daemon started under umask 0000, a data directory
others can write, a full disk with acknowledged predictions in the journal and a kill -9, and
an escape sequence in a job's application shown by `hpcpredict explain`.

The attacker is a real local user (created by the test) on the real local socket; the full
disk is a real 4 MiB tmpfs; the CLI is the real command in a subprocess.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hpcpredict.daemon.quotas import ROW_BYTES
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from tests.daemon.daemonproc import DaemonProcess
from tests.robustness.conftest import Client, job, outcome, start, tmpfs, world_dir  # noqa: F401  (fixtures)
from tests.robustness.test_faults import _fill, _until
from tests.robustness.test_identity import intruder  # noqa: F401  (fixture)

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="creates users, mounts a tmpfs")

BUDGET_KIB = 256
FLOOD_CALLS = 120
SCRIPT = b"#!/bin/bash\n#SBATCH -N 2\n" + b"# padding to make each stored request large\n" * 1300 + b"srun lmp\n"


def _rows(store: Path, sql: str, params=()) -> list:
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


@needs_root
def test_a_users_flood_of_valid_predicts_is_answered_but_kept_within_the_budget(world_dir, intruder):
    daemon = DaemonProcess(world_dir, env={"HPCPREDICT_STORE_USER_STORED_KIB_PER_HOUR": str(BUDGET_KIB),
                                           "HPCPREDICT_DAEMON_MAX_CONNECTIONS_PER_USER": "64"}).start()
    client = Client(daemon)
    try:
        started = time.monotonic()
        flood = subprocess.run([sys.executable, "-c", textwrap.dedent('''
            import json, sys
            from hpcpredict.daemon.client import DaemonClient
            from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
            script = sys.stdin.buffer.read()
            with DaemonClient(sys.argv[1], timeout=30) as client:
                for _ in range(int(sys.argv[2])):
                    answer = client.predict(pb.JobRequest(job=pb.JobIdentity(application="lmp"), script=script,
                                                          resources=pb.Resources(nodes=2, ntasks=8), time_limit_s=3600))
                    print(json.dumps([answer.runtime_s, answer.prediction_id]), flush=True)
        '''), daemon.hook_socket, str(FLOOD_CALLS)], input=SCRIPT, capture_output=True, user=intruder.pw_uid,
            group=intruder.pw_gid, extra_groups=[], env={"HOME": "/tmp", "PATH": "/usr/bin:/bin"}, cwd="/tmp",
            timeout=300)
        assert flood.returncode == 0, flood.stderr.decode()[-2000:]
        answers = [json.loads(line) for line in flood.stdout.decode().splitlines()]
        elapsed = time.monotonic() - started
        # every call answered: the budget bounds what is kept, never the predictions
        assert len(answers) == FLOOD_CALLS and all(runtime > 0 for runtime, _ in answers)
        assert answers[0][1] and not answers[-1][1]   # kept at first, not at the end
        # another user's history still goes in (the hooks' calls: root here)
        for number in range(3):
            assert client.stub.ReportOutcome(outcome(f"bob-{number}", user="bob"), timeout=10).stored
        bob = client.stub.Predict(job(user="bob", script=SCRIPT), timeout=10)
        assert bob.prediction_id   # the hooks' predictions are not budgeted
        client.admin.GetStatus(pb.StatusRequest(), timeout=10)   # commits the journal
        store = world_dir / "hpcpredict.sqlite"
        assert _until(lambda: _rows(store, "SELECT COUNT(*) FROM predictions WHERE prediction_id = ?",
                                    (bob.prediction_id,))[0][0] == 1)
        kept_rows, kept_bytes = _rows(store, "SELECT COUNT(*), COALESCE(SUM(LENGTH(request)), 0) FROM predictions "
                                             "WHERE user = ?", (intruder.pw_name,))[0]
        budget = BUDGET_KIB * 1024 * (1 + elapsed / 3600)   # the bucket refills while the flood runs
        assert kept_rows * ROW_BYTES + kept_bytes <= budget
        assert kept_rows == sum(1 for _, kept in answers if kept) < FLOOD_CALLS
        with_request = _rows(store, "SELECT COUNT(*) FROM predictions WHERE user = ? AND LENGTH(request) > 0",
                             (intruder.pw_name,))[0][0]
        assert 1 <= with_request <= budget // len(SCRIPT)   # then bare rows, then nothing
        # without the budget this flood would have kept FLOOD_CALLS requests of this size
        assert FLOOD_CALLS * len(SCRIPT) > 20 * budget
        assert _rows(store, "SELECT COUNT(*) FROM jobs WHERE user = 'bob' AND source = 'outcome'")[0][0] == 3
        text = client.daemon.log()
        assert "Traceback" not in text
    finally:
        client.close()
        daemon.stop()


def _walk(top: Path):
    yield top
    for root, folders, files in os.walk(top):
        for name in folders + files:
            yield Path(root) / name


@needs_root
def test_a_daemon_started_under_umask_0000_creates_nothing_others_can_write(world_dir):
    data = world_dir / "data"   # made by the daemon itself
    daemon = DaemonProcess(data, env={"HPCPREDICT_STORE_JOURNAL_MIB": "1"})
    data.rmdir()
    daemon.log_path = world_dir / "daemon.log"
    old = os.umask(0)
    try:
        daemon.start()
    finally:
        os.umask(old)
    client = Client(daemon)
    try:
        assert client.stub.Predict(job(), timeout=10).prediction_id
        assert client.stub.ReportOutcome(outcome("u-1"), timeout=10).stored
        client.admin.GetStatus(pb.StatusRequest(), timeout=10)
        hook_socket = Path(daemon.hook_socket)
        made = list(_walk(data))
        assert hook_socket in made and len(made) >= 6, made
        for path in made:
            mode = stat.S_IMODE(os.lstat(path).st_mode)
            if path == hook_socket:   # the one object every user must reach: connect needs write
                assert stat.S_ISSOCK(os.lstat(path).st_mode) and mode == 0o666
            elif path.is_dir():
                assert mode & 0o022 == 0, f"{path}: {mode:04o}"
            else:
                assert mode & 0o077 == 0, f"{path}: {mode:04o}"
        assert stat.S_IMODE(os.stat(data).st_mode) == 0o711   # holds the local socket: reachable, not listable
    finally:
        client.close()
        daemon.stop()


@needs_root
@pytest.mark.parametrize("which", ["data", "socket"])
def test_a_directory_others_can_write_is_refused_at_start(world_dir, which):
    data, run = world_dir / "data", world_dir / "run"
    data.mkdir()
    run.mkdir()
    os.chmod(data if which == "data" else run, 0o1777)
    daemon = DaemonProcess(data, env={"HPCPREDICT_DAEMON_HOOK_SOCKET": str(run / "hook.sock")})
    with pytest.raises(RuntimeError, match="exited with 1"):
        daemon.start(timeout=60)
    assert "lets other users write in it" in daemon.log() and "chmod o-w" in daemon.log()
    assert not (run / "hook.sock").exists() and not (data / "hpcpredict.sqlite").exists()


@needs_root
def test_the_journal_is_reopened_when_space_returns_after_a_full_disk_and_kill_9(world_dir, tmpfs):
    store_path = tmpfs / "hpcpredict.sqlite"
    env = {"HPCPREDICT_STORE_PATH": str(store_path), "HPCPREDICT_STORE_JOURNAL_MIB": "1"}
    daemon, client = start(world_dir, **env)
    try:
        assert client.stub.Predict(job(), timeout=10).prediction_id
        filler = _fill(tmpfs)
        acknowledged = [client.stub.Predict(job(), timeout=10).prediction_id for _ in range(40)]
        assert all(acknowledged)   # in the preallocated journal: acknowledged though the disk is full
    finally:
        client.close()
        daemon.stop(signal.SIGKILL)
    daemon, client = start(world_dir, **env)   # the disk is still full: the journal cannot be replayed
    try:
        assert client.stub.Predict(job(), timeout=10).runtime_s > 0
        assert "open prediction journal" in client.faults().get("store", "") or \
            not set(acknowledged) <= _stored(store_path)
        filler.unlink()
        # no restart: the daemon retries the journal and replays what it holds
        assert _until(lambda: set(acknowledged) <= _stored(store_path), 30), "acknowledged predictions not stored"
        # and the faults clear as each kind of write works again
        assert _until(lambda: client.stub.Predict(job(), timeout=10).prediction_id and "store" not in client.faults(),
                      15), client.faults()
    finally:
        client.close()
        daemon.stop()


def _stored(store_path: Path) -> set[str]:
    try:
        return {row[0] for row in _rows(store_path, "SELECT prediction_id FROM predictions")}
    except sqlite3.Error:
        return set()


def test_explain_shows_an_escape_sequence_in_a_users_application_escaped(world_dir):
    hostile = "lmp\x1b[2J\x1b[H\x07\u202e"
    daemon, client = start(world_dir)
    try:
        script = f"#!/bin/bash\n#HPCPREDICT app={hostile}\nsrun lmp\n".encode()
        request = job(user="mallory", script=script)
        request.job.application = ""
        request.job_id = "701"
        answer = client.stub.Predict(request, timeout=10)
        assert client.stub.ReportOutcome(pb.Outcome(job_id="701", prediction_id=answer.prediction_id,
                                                    elapsed_s=600, state="COMPLETED", end_time=1_700_000_000),
                                         timeout=10).stored
        client.admin.GetStatus(pb.StatusRequest(), timeout=10)
    finally:
        client.close()
        daemon.stop()
    stored = _rows(world_dir / "hpcpredict.sqlite", "SELECT application FROM jobs WHERE job_id = '701'")
    assert stored and "\x1b" in stored[0][0]   # the attack reached the store: explain must defuse it
    done = subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "explain", "701"], capture_output=True,
                          env={**os.environ, "HPCPREDICT_DATA_DIR": str(world_dir)}, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    out = done.stdout.decode()
    assert not any(ord(c) < 32 and c != "\n" or 0x7f <= ord(c) < 0xa0 or c == "\u202e" for c in out), repr(out)
    assert "lmp\\x1b[2J\\x1b[H\\x07" in out


@needs_root
def test_past_the_store_cap_users_predictions_are_not_kept_and_outcomes_still_are(world_dir, intruder):
    """[store] max_store_mib 1 with two 1 MiB journals: the cap is reached from the start, a
    fault says so (status and metrics) before any disk is full; an ordinary user's Predict is
    answered and not kept, the hooks' keep a compact request (no environment, no script), and
    outcomes are stored and linked."""
    daemon = DaemonProcess(world_dir, env={"HPCPREDICT_STORE_MAX_STORE_MIB": "1", "HPCPREDICT_STORE_JOURNAL_MIB": "1",
                                           "HPCPREDICT_STORE_MIN_FREE_MIB": "0"}).start()
    client = Client(daemon)
    try:
        asked = subprocess.run([sys.executable, "-c", textwrap.dedent('''
            import sys
            from hpcpredict.daemon.client import DaemonClient
            from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
            with DaemonClient(sys.argv[1], timeout=30) as client:
                answer = client.predict(pb.JobRequest(job=pb.JobIdentity(application="lmp"), time_limit_s=3600))
            print(answer.runtime_s > 0, repr(answer.prediction_id))
        '''), daemon.hook_socket], capture_output=True, text=True, user=intruder.pw_uid, group=intruder.pw_gid,
            extra_groups=[], env={"HOME": "/tmp", "PATH": "/usr/bin:/bin"}, cwd="/tmp", timeout=120)
        assert asked.stdout.strip() == "True ''", asked.stdout + asked.stderr
        request = job(user="bob", script=SCRIPT)
        request.environment["SECRET"] = "x" * 1000
        hooks = client.stub.Predict(request, timeout=10)
        assert hooks.prediction_id
        assert client.stub.ReportOutcome(pb.Outcome(job_id="cap-1", prediction_id=hooks.prediction_id, elapsed_s=600,
                                                    state="COMPLETED", end_time=1_700_000_000), timeout=10).stored
        faults = client.faults()
        assert faults["store"].startswith("size cap: store is") and "outcomes still stored" in faults["store"]
        assert "store" in client.metric_faults()
    finally:
        client.close()
        daemon.stop()
    store = world_dir / "hpcpredict.sqlite"
    [(kept,)] = _rows(store, "SELECT request FROM predictions WHERE prediction_id = ?", (hooks.prediction_id,))
    compact = pb.JobRequest.FromString(kept)
    assert compact.job.user == "bob" and not compact.environment and len(compact.script) < 200
    assert _rows(store, "SELECT COUNT(*) FROM predictions WHERE user = ?", (intruder.pw_name,))[0][0] == 0
    assert _rows(store, "SELECT prediction_id, user FROM jobs WHERE job_id = 'cap-1'") == [(hooks.prediction_id, "bob")]


def test_the_hooks_rows_are_kept_within_the_writers_budget_then_compact_then_bare(world_dir):
    """A user submitting through sbatch as fast as slurmctld takes jobs makes the submit hook (a
    history writer) store every job's request (~15 KB here); [store] writer_stored_kib_per_hour
    bounds that: whole, then compact (no script, no environment, the parsed inputs), then no
    request, and every row (the link of an outcome to its prediction) kept."""
    budget_kib, calls = 64, 30
    daemon = DaemonProcess(world_dir, env={"HPCPREDICT_STORE_WRITER_STORED_KIB_PER_HOUR": str(budget_kib),
                                           "HPCPREDICT_STORE_JOURNAL_MIB": "0"}).start()
    client = Client(daemon)
    try:
        ids = []
        for index in range(calls):
            request = job(script=SCRIPT.replace(b"srun lmp", b"srun lmp -in in.%d" % index))
            request.environment.update({"SLURM_X": "x" * 2000, "PATH": "/usr/bin:/bin"})
            answer = client.stub.Predict(request, timeout=30)   # root: a history writer, as the hook's SlurmUser
            assert answer.prediction_id and answer.runtime_s > 0
            ids.append(answer.prediction_id)
        status_faults = client.faults()
    finally:
        client.close()
        daemon.stop()
    rows = dict(_rows(world_dir / "hpcpredict.sqlite", "SELECT prediction_id, request FROM predictions"))
    assert sorted(rows) == sorted(ids)                              # every row kept
    kept = [pb.JobRequest.FromString(rows[i]) if rows[i] else None for i in ids]
    cut_out = b"# hpcpredict: script cut at 0 "          # what is left of a script in the compact form
    whole = [r for r in kept if r is not None and not r.script.startswith(cut_out)]
    compact = [r for r in kept if r is not None and r.script.startswith(cut_out)]
    bare = [r for r in kept if r is None]
    assert whole and compact and bare, (len(whole), len(compact), len(bare))
    assert kept == whole + compact + [None] * len(bare)       # in that order
    assert all(not r.environment and r.inputs["in"].text.startswith("in.") for r in compact)
    assert all(r.environment for r in whole)
    stored = sum(ROW_BYTES + len(rows[i] or b"") for i in ids)
    assert stored <= (budget_kib << 10) + ROW_BYTES * calls + 16384   # the budget, the bare rows, one refill's worth
    assert status_faults["store"].startswith("writers' stored bytes: uid 0 is past")
