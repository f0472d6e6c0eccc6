"""Real daemons on each backend: kill -9 loses nothing acknowledged; two daemons on one
PostgreSQL store, one killed, the other goes on answering and no outcome is lost."""
from __future__ import annotations

import os
import random
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

import grpc
import pytest

from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from tests.daemon.daemonproc import DaemonProcess
from tests.robustness.conftest import Client, job, outcome
from tests.robustness.test_kill9 import _kill9, _stream


@pytest.fixture
def data_dirs():
    made = []

    def make() -> Path:
        path = Path(tempfile.mkdtemp(prefix="hpd-", dir="/tmp"))
        os.chmod(path, 0o755)
        made.append(path)
        return path

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


def _environment(name: str, request) -> tuple[dict, callable]:
    """Daemon environment for the backend, and how to open the same store in the test."""
    if name == "sqlite":
        return {}, None
    from hpcpredict.daemon.store import PostgresStore

    dsn = request.getfixturevalue("postgres_server").new_database()
    return {"HPCPREDICT_STORE_BACKEND": "postgres", "HPCPREDICT_STORE_DSN": dsn}, lambda: PostgresStore(dsn)


def _start(data_dir: Path, env: dict) -> tuple[DaemonProcess, Client]:
    daemon = DaemonProcess(data_dir, env={"HPCPREDICT_DAEMON_HOOK_SOCKET": "", **env}).start()
    return daemon, Client(daemon)


@pytest.mark.parametrize("name", ["sqlite", "postgres"])
def test_acknowledged_records_survive_kill9_on_each_backend(name, request, data_dirs):
    env, open_store = _environment(name, request)
    data_dir = data_dirs()
    rng = random.Random(11)
    acked_outcomes: set[str] = set()
    acked_predictions: set[str] = set()
    for round_number in range(3):
        daemon, client = _start(data_dir, env)
        died: list = []
        threads = [threading.Thread(target=_stream, args=(client, f"r{round_number}s{s}", acked_outcomes,
                                                          acked_predictions, died)) for s in range(3)]
        for thread in threads:
            thread.start()
        time.sleep(rng.uniform(0.4, 1.2))
        _kill9(daemon)
        for thread in threads:
            thread.join(30)
        client.close()
        assert len(died) == 3
    assert acked_outcomes
    if open_store is None:
        from hpcpredict.daemon.store import SQLiteStore

        store = SQLiteStore(str(data_dir / "hpcpredict.sqlite"), journal_bytes=8 << 20)   # replays the journal
    else:
        store = open_store()
    try:
        stored = {r.job_id for r in store.iter_jobs()}
        assert not acked_outcomes - stored, f"lost outcomes: {sorted(acked_outcomes - stored)[:5]}"
        lost = [p for p in acked_predictions if store.prediction(p) is None]
        assert not lost, f"lost predictions: {lost[:5]}"
    finally:
        store.close()


def test_two_daemons_on_one_postgres_store_one_killed_the_other_answers(request, data_dirs):
    env, open_store = _environment("postgres", request)
    first, first_client = _start(data_dirs(), env)
    second, second_client = _start(data_dirs(), env)
    acked: set[str] = set()
    try:
        for number in range(20):   # each daemon takes half the outcomes
            client = first_client if number % 2 else second_client
            estimate = client.stub.Predict(job(user="ann"), timeout=10)
            ack = client.stub.ReportOutcome(outcome(f"j{number}", estimate.prediction_id, 100.0 + number,
                                                    user="ann"), timeout=10)
            assert ack.stored
            acked.add(f"j{number}")
        _kill9(first)
        with pytest.raises(grpc.RpcError):
            first_client.stub.Predict(job(), timeout=2)
        first_client.close()
        for number in range(20, 30):   # the survivor goes on; what the dead one stored is there
            estimate = second_client.stub.Predict(job(user="ann"), timeout=10)
            assert second_client.stub.ReportOutcome(outcome(f"j{number}", estimate.prediction_id, 100.0,
                                                            user="ann"), timeout=10).stored
            acked.add(f"j{number}")
        assert second_client.stub.ReportOutcome(outcome("j1"), timeout=10).duplicate   # stored by the dead one
        status = second_client.admin.GetStatus(pb.StatusRequest(), timeout=10)
        assert status.outcomes == 30
    finally:
        second_client.close()
        second.stop()
    store = open_store()
    try:
        assert {r.job_id for r in store.iter_jobs()} == acked
    finally:
        store.close()
