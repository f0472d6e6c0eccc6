"""Faults: the daemon keeps answering, says what is wrong (GetStatus + metrics), and recovers.

Real faults where this machine can make them: a 4 MiB tmpfs that really fills up and a tmpfs
really mounted read-only (mounting needs root, as the suite runs in CI); a store whose write
lock another process holds stands in for a disk too slow to write (no device-mapper delay
target here); corrupt and vanished files are real files.
"""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
import pytest

from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from tests.robustness.conftest import job, outcome, start

RUNS_CSV = Path(__file__).resolve().parents[1] / "data" / "runtime" / "lammps_melt.csv"
LAMMPS = b"#!/bin/bash\n#SBATCH -N 1\n#HPCPREDICT x=10 y=10 z=10 steps=300 cutoff=2.5\nsrun lmp -in in.melt\n"


def _until(predicate, seconds: float = 15.0):
    """Poll ``predicate`` until it returns something true (recovery is asynchronous)."""
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


def _fill(directory: Path) -> Path:
    filler = directory / "filler"
    # unbuffered: a write the full disk cuts short leaves nothing for close() to flush (and fail on)
    with open(filler, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
        except OSError:
            pass
    return filler


def _stored_prediction_ids(store_path: Path) -> set[str]:
    db = sqlite3.connect(store_path)
    try:
        return {row[0] for row in db.execute("SELECT prediction_id FROM predictions")}
    finally:
        db.close()


@pytest.mark.parametrize("journal_mib", [0, 1], ids=["direct", "journal"])
def test_store_disk_full_then_freed(world_dir, tmpfs, journal_mib):
    store_path = tmpfs / "hpcpredict.sqlite"
    daemon, client = start(world_dir, HPCPREDICT_STORE_PATH=str(store_path),
                           HPCPREDICT_STORE_JOURNAL_MIB=str(journal_mib))
    try:
        assert client.stub.Predict(job(), timeout=10).prediction_id
        filler = _fill(tmpfs)
        # every answer still comes. Without a journal its record cannot be kept (no prediction
        # id); the journal was preallocated at start, so it keeps them until the disk has room.
        answers = [client.stub.Predict(job(), timeout=10) for _ in range(5)]
        assert all(a.runtime_s > 0 for a in answers)
        kept = [a.prediction_id for a in answers if a.prediction_id]
        assert len(kept) == (5 if journal_mib else 0)
        with pytest.raises(grpc.RpcError) as caught:
            client.stub.ReportOutcome(outcome("full-1"), timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE  # never acknowledged unless on disk
        assert "full" in client.faults()["store"]
        assert "store" in client.metric_faults()
        # A call that works (a Predict) does not clear the fault of one that still fails.
        assert client.stub.Predict(job(), timeout=10).runtime_s > 0
        faults = client.admin.GetStatus(pb.StatusRequest(), timeout=10).faults
        assert any(f.startswith("store: ReportOutcome: ") and "full" in f for f in faults), faults
        assert "store" in client.metric_faults()
        assert client.journal_rows() >= len(kept)   # waiting in the journal, visible to monitoring
        filler.unlink()
        assert _until(lambda: client.stub.Predict(job(), timeout=10).prediction_id)
        assert _until(lambda: client.stub.ReportOutcome(outcome("full-2"), timeout=10).stored)
        assert _until(lambda: "store" not in client.faults())
        assert "store" not in client.metric_faults()
        assert _until(lambda: client.journal_rows() == 0)
    finally:
        client.close()
        daemon.stop()
    assert set(kept) <= _stored_prediction_ids(store_path), "a prediction answered with an id was lost"


def test_store_on_a_read_only_file_system_then_writable(world_dir, tmpfs):
    store_path = tmpfs / "hpcpredict.sqlite"
    daemon, client = start(world_dir, HPCPREDICT_STORE_PATH=str(store_path))
    assert client.stub.ReportOutcome(outcome("ro-1"), timeout=10).stored
    client.close()
    daemon.stop()
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    # a journal that fits the 4 MiB file system (the default 8 MiB never could: a fault of its own)
    daemon, client = start(world_dir, HPCPREDICT_STORE_PATH=str(store_path), HPCPREDICT_STORE_JOURNAL_MIB="1")
    try:
        answer = client.stub.Predict(job(), timeout=10)
        assert answer.runtime_s > 0 and not answer.prediction_id
        with pytest.raises(grpc.RpcError) as caught:
            client.stub.ReportOutcome(outcome("ro-2"), timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "store" in client.faults()
        assert "store" in client.metric_faults()
        subprocess.run(["mount", "-o", "remount,rw", str(tmpfs)], check=True)
        assert _until(lambda: client.stub.Predict(job(), timeout=10).prediction_id)  # reopened (retry 1 s)
        assert client.stub.ReportOutcome(outcome("ro-3"), timeout=10).stored
        assert _until(lambda: "store" not in client.faults()), client.faults()
        # the history written before the fault is back in use (replayed once the store reopened)
        assert _until(lambda: not client.stub.Predict(job(), timeout=10).fallback)
        assert "store" not in client.metric_faults()
    finally:
        client.close()
        daemon.stop()


@pytest.mark.parametrize("journal_mib", [0, 8], ids=["direct", "journal"])
def test_stalled_store_does_not_stall_predict(world_dir, journal_mib):
    """A disk too slow to take a write in time: Predict answers anyway, outcomes are refused."""
    daemon, client = start(world_dir, HPCPREDICT_STORE_BUSY_TIMEOUT_MS="1500",
                           HPCPREDICT_STORE_JOURNAL_MIB=str(journal_mib))
    blocker = sqlite3.connect(daemon.data_dir / "hpcpredict.sqlite", isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # hold the write lock, as a stuck writer would
        answer = client.stub.Predict(job(), timeout=1.0)  # well under the store's 1.5 s wait
        assert answer.runtime_s > 0
        # without a journal the record is dropped (no id); with one it waits there for the store
        assert bool(answer.prediction_id) == bool(journal_mib)
        with pytest.raises(grpc.RpcError) as caught:
            client.stub.ReportOutcome(outcome("slow-1"), timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "locked" in client.faults()["store"]
        blocker.execute("ROLLBACK")
        assert client.stub.Predict(job(), timeout=10).prediction_id
        assert client.stub.ReportOutcome(outcome("slow-2"), timeout=10).stored
        assert _until(lambda: "store" not in client.faults())
    finally:
        blocker.close()
        client.close()
        daemon.stop()
    if journal_mib:
        assert answer.prediction_id in _stored_prediction_ids(daemon.data_dir / "hpcpredict.sqlite")


def _runtime_model(folder: Path) -> Path:
    from hpcpredict.daemon.lab.runtime.dataset import parse_runs_csv
    from hpcpredict.daemon.lab.runtime.model import RuntimeModel
    from hpcpredict.daemon.lab.runtime.packing import save_application_model

    rows = [line.split(",") for line in RUNS_CSV.read_text().splitlines() if line.strip()]
    keep = [rows[0].index(c) for c in ("x", "y", "z", "steps", "cutoff", "runtime_s")]
    text = "\n".join(",".join(row[i] for i in keep) for row in rows) + "\n"
    model = RuntimeModel(params={"n_estimators": 10, "random_state": 0}).fit(parse_runs_csv(text, target="runtime_s"))
    save_application_model(model, folder, application="lmp", metadata={"version": "t"})
    return folder


def test_corrupt_model_at_start_then_a_good_one(world_dir, tmp_path):
    from hpcpredict.daemon.registry import ModelRegistry

    registry = ModelRegistry(world_dir / "models")
    bad = registry.publish("runtime", _runtime_model(tmp_path / "m"))
    (blob,) = bad.path.rglob("inputs.npz")  # wherever the registry keeps the model's own files
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped bit-pattern on disk
    blob.write_bytes(bytes(data))
    daemon, client = start(world_dir)
    try:
        answer = client.stub.Predict(job(script=LAMMPS), timeout=10)
        assert answer.runtime_s > 0 and not answer.model_name.startswith("runtime")  # served without it
        assert "checksum mismatch" in client.faults()["models"]
        assert "models" in client.metric_faults()
        registry.publish("runtime", tmp_path / "m")
        reply = client.admin.ReloadModels(pb.ReloadRequest(), timeout=60)
        assert not reply.errors
        assert client.stub.Predict(job(script=LAMMPS), timeout=10).model_name.startswith("runtime-extra-trees")
        assert "models" not in client.faults()
        assert "models" not in client.metric_faults()
    finally:
        client.close()
        daemon.stop()


def test_topology_file_that_disappears(world_dir):
    from hpcpredict.topology.placement import Placement

    topology = world_dir / "placement.json"
    Placement(kind="tree", levels=("leaf",), paths={f"n{i}": (f"s{i // 4}",) for i in range(16)}).save(topology)
    saved = topology.read_bytes()
    daemon, client = start(world_dir, HPCPREDICT_TOPOLOGY_FILE=str(topology))
    try:
        assert not client.faults()
        topology.unlink()
        reply = client.admin.ReloadModels(pb.ReloadRequest(), timeout=60)
        assert any("topology file" in error for error in reply.errors)
        assert "topology file" in client.faults()["models"]
        assert "models" in client.metric_faults()
        allocation = pb.AllocationRequest(request=job(), job_id="5", node_list="n[0-7]")
        assert client.stub.PredictAtAllocation(allocation, timeout=10).runtime_s > 0
        topology.write_bytes(saved)
        assert not client.admin.ReloadModels(pb.ReloadRequest(), timeout=60).errors
        assert "models" not in client.faults()
        assert "models" not in client.metric_faults()
    finally:
        client.close()
        daemon.stop()


def test_overload_is_refused_at_once_not_queued(world_dir):
    """Past [daemon] max_concurrent calls in flight, RESOURCE_EXHAUSTED comes back immediately."""
    import threading

    from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

    daemon, client = start(world_dir, HPCPREDICT_DAEMON_MAX_CONCURRENT="2")
    channel = grpc.insecure_channel(f"unix:{daemon.socket}")
    release = threading.Event()

    def held_open():  # a client that never finishes its request stream keeps its call in flight
        yield reflection_pb2.ServerReflectionRequest(list_services="")
        release.wait(60)

    try:
        reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
        streams = [reflection.ServerReflectionInfo(held_open(), timeout=60) for _ in range(2)]
        for stream in streams:
            next(stream)  # answered: the call is running on the server
        with pytest.raises(grpc.RpcError) as caught:
            client.stub.Predict(job(), timeout=20)  # queued, it would end in DEADLINE_EXCEEDED
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        release.set()
        for stream in streams:
            list(stream)
        assert _until(lambda: _predicts(client))
    finally:
        release.set()
        channel.close()
        client.close()
        daemon.stop()


def _predicts(client) -> bool:
    try:
        return client.stub.Predict(job(), timeout=10).runtime_s > 0
    except grpc.RpcError:
        return False


def test_a_full_disk_leaves_no_runtime_info_copy_and_its_fault_clears_when_the_disk_has_room(tmpfs, tmp_path):
    """On a full data directory the daemon cannot write hpcpredictd.json: its half-written
    ``.hpcpredictd.json.PID`` is removed, the fault "write runtime info" is shown, and once the
    disk has room again the file is written and the fault clears without a restart. A copy a
    killed daemon left (a pid no longer running) is removed at start."""
    import json as _json
    from tests.robustness.test_read_only_data_dir import _start_and_ask_status

    data = tmpfs
    (data / ".hpcpredictd.json.4194303").write_text("")   # empty (removing it frees no room); that pid never runs
    run = tmp_path / "run"
    run.mkdir()
    filler = _fill(data)
    env = {**os.environ, "HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": str(data),
           "HPCPREDICT_DAEMON_METRICS": "", "HPCPREDICT_DAEMON_SOCKET": str(run / "grpc.sock"),
           "HPCPREDICT_DAEMON_HOOK_SOCKET": str(run / "local.sock"), "HPCPREDICT_STORE_JOURNAL_MIB": "0"}
    daemon, status = _start_and_ask_status(env, tmp_path / "daemon.log")
    try:
        assert daemon.poll() is None and status.returncode == 0, (tmp_path / "daemon.log").read_text()[-3000:]
        assert any(fault.startswith("daemon: write runtime info:") for fault in _json.loads(status.stdout)["faults"])
        assert not list(data.glob(".hpcpredictd.json.*"))       # neither its own copy nor the dead one's
        assert not (data / "hpcpredictd.json").exists()
        filler.unlink()                                         # the disk has room again

        def recovered():
            done = subprocess.run([sys.executable, "-m", "hpcpredict.daemon.cli.main", "status", "--json"], env=env,
                                  capture_output=True, text=True, timeout=60)
            faults = _json.loads(done.stdout)["faults"] if done.returncode == 0 else ["?"]
            return not any(fault.startswith("daemon: write runtime info") for fault in faults)

        assert _until(recovered, 60)
        assert _json.loads((data / "hpcpredictd.json").read_text())["pid"] == daemon.pid
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
