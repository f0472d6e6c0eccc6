"""kill -9 at any moment: every acknowledged record survives; a killed publish changes nothing.

The daemon is the real one (subprocess, Unix socket). SIGKILL gives it no chance to flush or
close anything: what is on disk after the kill is what SQLite (WAL) committed before the reply.
"""
from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import grpc

from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from tests.robustness.conftest import Client, job, outcome, start

ROUNDS = 5
STREAMS = 4


def _kill9(daemon) -> None:
    daemon.proc.send_signal(signal.SIGKILL)
    daemon.proc.wait(30)
    daemon._log.close()


def _stream(client: Client, prefix: str, acked_outcomes: set, acked_predictions: set, died: list) -> None:
    """Predict + ReportOutcome until the daemon dies; remember what was acknowledged."""
    number = 0
    while True:
        job_id = f"{prefix}-{number}"
        number += 1
        try:
            estimate = client.stub.Predict(job(user=f"u{prefix[-1]}"), timeout=10)
            if estimate.prediction_id:
                acked_predictions.add(estimate.prediction_id)
            ack = client.stub.ReportOutcome(outcome(job_id, estimate.prediction_id, 100.0 + number,
                                                    user=f"u{prefix[-1]}"), timeout=10)
            if ack.stored:
                acked_outcomes.add(job_id)
        except grpc.RpcError as error:
            died.append(error.code())
            return


def test_acknowledged_outcomes_and_predictions_survive_repeated_kill9(world_dir):
    rng = random.Random(9)
    acked_outcomes: set[str] = set()
    acked_predictions: set[str] = set()
    for round_number in range(ROUNDS):
        daemon, client = start(world_dir)
        before = len(acked_outcomes)
        died: list = []
        threads = [threading.Thread(target=_stream, args=(client, f"r{round_number}s{s}", acked_outcomes,
                                                          acked_predictions, died)) for s in range(STREAMS)]
        for thread in threads:
            thread.start()
        time.sleep(rng.uniform(0.3, 1.2))  # kill at an arbitrary moment of the stream
        _kill9(daemon)
        for thread in threads:
            thread.join(30)
        client.close()
        assert len(died) == STREAMS, "every stream was cut by the kill"
        assert len(acked_outcomes) > before, f"round {round_number}: nothing was acknowledged before the kill"

    # after the last kill: a clean start must see everything that was acknowledged
    daemon, client = start(world_dir)
    try:
        status = client.admin.GetStatus(pb.StatusRequest(), timeout=10)
        assert status.outcomes >= len(acked_outcomes)
        for job_id in sorted(acked_outcomes)[:5]:  # idempotency holds across the crash too
            ack = client.stub.ReportOutcome(outcome(job_id), timeout=10)
            assert ack.duplicate
    finally:
        client.close()
        daemon.stop()
    db = sqlite3.connect(daemon.data_dir / "hpcpredict.sqlite")
    stored_jobs = {row[0] for row in db.execute("SELECT job_id FROM jobs WHERE source = 'outcome'")}
    stored_predictions = {row[0] for row in db.execute("SELECT prediction_id FROM predictions")}
    db.close()
    assert not acked_outcomes - stored_jobs, f"lost acknowledged outcomes: {sorted(acked_outcomes - stored_jobs)[:10]}"
    assert not acked_predictions - stored_predictions, "lost acknowledged predictions"
    assert len(acked_outcomes) >= ROUNDS


PUBLISHER = textwrap.dedent("""
    import sys
    from hpcpredict.daemon.registry import ModelRegistry
    registry = ModelRegistry(sys.argv[1])
    while True:
        artifact = registry.publish("topology", sys.argv[2])
        print(artifact.version, flush=True)
""")


def _placement_folder(path, nodes: int, switch_prefix: str):
    from hpcpredict.topology.placement import Placement

    path.mkdir()
    Placement(kind="tree", levels=("leaf", "spine"),
              paths={f"n{i:05d}": (f"{switch_prefix}{i // 32}", f"spine{i // 1024}") for i in range(nodes)}
              ).save(path / "topology.json")
    return path


def test_killed_publish_leaves_a_complete_model_serving(world_dir, tmp_path):
    from hpcpredict.daemon.registry import CURRENT, ModelRegistry

    registry = ModelRegistry(world_dir / "models")
    first = registry.publish("topology", _placement_folder(tmp_path / "v1", 2000, "leafA"))
    daemon, client = start(world_dir)
    rng = random.Random(3)
    newer = _placement_folder(tmp_path / "v2", 20000, "leafB")  # bigger: copy + fsync take a while
    seen_versions = {first.version}
    try:
        for _ in range(8):
            publisher = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(registry.root), str(newer)],
                                         stdout=subprocess.PIPE, text=True)
            time.sleep(rng.uniform(0.4, 1.5))
            publisher.send_signal(signal.SIGKILL)
            publisher.wait(30)
            completed = publisher.stdout.read().split()
            publisher.stdout.close()
            # whatever CURRENT names is a whole, verified artifact (checksums) the loader accepts
            current = registry.current("topology")
            artifact, placement = registry.load("topology")
            assert current.version in seen_versions | set(completed) or current.version > max(seen_versions)
            seen_versions |= set(completed) | {current.version}
            reply = client.admin.ReloadModels(pb.ReloadRequest(), timeout=60)
            assert not reply.errors, reply.errors
            assert [m.version for m in reply.models if m.kind == "topology"] == [current.version]
            assert client.stub.Predict(job(), timeout=10).runtime_s > 0
        # half-written versions never become CURRENT: they stay hidden staging folders
        home = registry.root / "topology" / "_site"
        assert (home / CURRENT).read_text().strip() in registry.versions("topology")
        assert all(not name.startswith(".") for name in registry.versions("topology"))
        staged = [p.name for p in home.iterdir() if p.name.startswith(".tmp-")]
        assert staged, "no kill landed inside a publish (staging folder left behind)"
        assert not client.faults()
    finally:
        client.close()
        daemon.stop()
