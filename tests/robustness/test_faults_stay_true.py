"""Faults that stay true: set by what fails, cleared only by the same thing working again.

Real faults: a 4 MiB tmpfs filled before the daemon starts (no room for its journals or
SQLite's ``-shm``), a journal path that is a directory, a models directory removed under the
running daemon.
"""
from __future__ import annotations

import os
import shutil
import signal

import grpc
import pytest

from hpcpredict.daemon.registry import ModelRegistry
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from tests.robustness.conftest import job, outcome, start, tmpfs, world_dir  # noqa: F401  (fixtures)
from tests.robustness.test_faults import _fill, _until
from tests.robustness.test_private_files import _placement_folder


def _stored(client, job_id: str) -> bool:
    try:
        return client.stub.ReportOutcome(outcome(job_id), timeout=10).stored
    except grpc.RpcError:
        return False


def _reloads(daemon) -> int:
    """Model loads the daemon has done (one log line each)."""
    return daemon.log().count("hpcpredict.daemon.engine: serving ")


def test_a_deleted_models_directory_is_a_fault_and_the_models_keep_serving(world_dir, tmp_path):
    registry = ModelRegistry(world_dir / "models")
    registry.publish("topology", _placement_folder(tmp_path / "placement"))
    daemon, client = start(world_dir)
    try:
        assert not client.faults()
        shutil.rmtree(world_dir / "models")
        reply = client.admin.ReloadModels(pb.ReloadRequest(), timeout=60)
        assert any("models directory" in error and "missing" in error for error in reply.errors), reply.errors
        assert "missing" in client.faults()["models"]
        assert "models" in client.metric_faults()
        assert any(m.kind == "topology" for m in reply.models)   # the last good one still serves
        registry.publish("topology", _placement_folder(tmp_path / "again"))
        assert not client.admin.ReloadModels(pb.ReloadRequest(), timeout=60).errors
        assert "models" not in client.faults()
    finally:
        client.close()
        daemon.stop()


def test_an_unreadable_models_directory_is_a_fault(world_dir, tmp_path):
    registry = ModelRegistry(world_dir / "models")
    registry.publish("topology", _placement_folder(tmp_path / "placement"))
    daemon, client = start(world_dir)
    try:
        os.chmod(world_dir / "models", 0)
        if os.access(world_dir / "models", os.R_OK):   # root reads anything: make it a file instead
            os.chmod(world_dir / "models", 0o750)
            os.rename(world_dir / "models", world_dir / "models.moved")
            (world_dir / "models").write_text("not a directory\n")
        reply = client.admin.ReloadModels(pb.ReloadRequest(), timeout=60)
        assert any("models directory" in error for error in reply.errors), reply.errors
        assert "models" in client.faults()
    finally:
        client.close()
        daemon.stop()


def test_full_disk_before_start_journal_and_shm_are_faults_not_crashes(world_dir, tmpfs):
    """No room for the journals (preallocated) nor SQLite's -shm: the daemon starts, answers,
    reports the store fault, and takes its records once there is room again."""
    store_path = tmpfs / "hpcpredict.sqlite"
    daemon, client = start(world_dir, HPCPREDICT_STORE_PATH=str(store_path), HPCPREDICT_STORE_JOURNAL_MIB="1")
    assert client.stub.ReportOutcome(outcome("before"), timeout=10).stored
    client.close()
    daemon.stop()
    for leftover in tmpfs.glob("hpcpredict.sqlite*-*"):   # journals, -wal, -shm: must be made again
        leftover.unlink()
    filler = _fill(tmpfs)
    daemon, client = start(world_dir, HPCPREDICT_STORE_PATH=str(store_path), HPCPREDICT_STORE_JOURNAL_MIB="1")
    try:
        assert client.stub.Predict(job(), timeout=10).runtime_s > 0
        with pytest.raises(grpc.RpcError) as caught:
            client.stub.ReportOutcome(outcome("during"), timeout=10)
        assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "store" in client.faults()
        assert daemon.proc.poll() is None
        filler.unlink()
        assert _until(lambda: _stored(client, "after"))
        assert daemon.proc.poll() is None
    finally:
        client.close()
        code = daemon.stop()
    assert code not in (-signal.SIGBUS, 128 + signal.SIGBUS)


def test_a_journal_that_cannot_be_opened_falls_back_to_direct_writes(world_dir):
    (world_dir / "hpcpredict.sqlite.journal-0").mkdir()   # not a file: EISDIR on open
    daemon, client = start(world_dir)
    try:
        answer = client.stub.Predict(job(), timeout=10)
        assert answer.prediction_id
        assert client.admin.GetStatus(pb.StatusRequest(), timeout=10).predictions >= 1
        assert "prediction journal unavailable" in daemon.log()
    finally:
        client.close()
        daemon.stop()


def test_a_fault_clearing_does_not_reload(world_dir, tmpfs):
    """Disk full then freed: outcomes and predictions fail, then work; no model reload follows."""
    store_path = tmpfs / "hpcpredict.sqlite"
    daemon, client = start(world_dir, HPCPREDICT_STORE_PATH=str(store_path), HPCPREDICT_STORE_JOURNAL_MIB="0")
    try:
        assert client.stub.ReportOutcome(outcome("ok-1"), timeout=10).stored
        loads = _reloads(daemon)
        filler = _fill(tmpfs)
        for index in range(3):
            client.stub.Predict(job(), timeout=10)
            with pytest.raises(grpc.RpcError):
                client.stub.ReportOutcome(outcome(f"full-{index}"), timeout=10)
        assert "store" in client.faults()
        filler.unlink()
        assert _until(lambda: client.stub.Predict(job(), timeout=10).prediction_id)
        assert _until(lambda: _stored(client, "ok-2"))
        assert _until(lambda: "store" not in client.faults())
        assert _reloads(daemon) == loads, "a fault clearing reloaded the models"
    finally:
        client.close()
        daemon.stop()
