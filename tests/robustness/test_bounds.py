"""Every resource bounded, from the attacker's side: valid requests that are merely large.

A real daemon on its real socket: distinct 1 MiB scripts (the parse cache), large
environments and argv words, requests whose whole body would be stored, padded host lists;
and the store's retention, applied to real rows. Memory is read from /proc of the daemon.
"""
from __future__ import annotations

import hashlib
import os
import sqlite3
import time

import grpc
import pytest

from hpcpredict.daemon.config import load_config
from hpcpredict.daemon.errors import InvalidRequest
from hpcpredict.daemon.jobspec import _PARSE_CACHE, job_spec_from_request, stored_request
from hpcpredict.daemon.store import PredictionRow, SQLiteStore
from hpcpredict.proto.v1 import hpcpredict_pb2 as pb
from tests.robustness.conftest import job, start, world_dir  # noqa: F401  (fixture)

LIMITS = load_config(None, environ={"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": "/nonexistent"}).request_bounds


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:")) / 1024


def _script(index: int, size: int) -> bytes:
    head = f"#!/bin/bash\n#HPCPREDICT size={index}\nsrun lmp -in in.{index}\n".encode()
    return head + b"# padding\n" * ((size - len(head)) // 10)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("bounds")
    os.chmod(data_dir, 0o755)
    daemon, client = start(data_dir)
    yield daemon, client
    client.close()
    daemon.stop()


def test_distinct_megabyte_scripts_do_not_grow_the_daemon(served):
    """Before: a cache of 4,096 parses keyed on whole scripts kept every 1 MiB script sent
    (~0.95 MiB of RSS each). Now the cache is keyed by digest and bounded by bytes."""
    daemon, client = served
    for index in range(20):   # warm up: first allocations of the gRPC and parse paths
        client.stub.Predict(job(script=_script(index, 1 << 20)), timeout=30)
    before = _rss_mib(daemon.proc.pid)
    for index in range(20, 220):
        client.stub.Predict(job(script=_script(index, 1 << 20)), timeout=30)
    grown = _rss_mib(daemon.proc.pid) - before
    assert grown < 64, f"RSS grew {grown:.0f} MiB over 200 distinct 1 MiB scripts"


def test_parse_cache_stays_within_its_byte_budget():
    _PARSE_CACHE.clear()
    for index in range(300):
        request = job(script=_script(index, 64 << 10))
        request.environment.update({f"V{i}": "x" * 200 for i in range(50)})
        job_spec_from_request(request, LIMITS)
    assert 0 < _PARSE_CACHE.bytes <= LIMITS.parse_cache_mib << 20
    assert len(_PARSE_CACHE) == 300   # parses are small: all fit, the scripts themselves are not kept


HUGE_FIELDS = [
    ("environment", lambda r: r.environment.update({f"V{i}": "x" for i in range(LIMITS.max_environment + 1)})),
    ("environment['BIG']", lambda r: r.environment.update({"BIG": "x" * (30 << 20)})),
    ("environment key", lambda r: r.environment.update({"K" * 5000: "x"})),
    ("argv[1]", lambda r: r.argv.extend(["ok", "y" * (LIMITS.max_text_bytes + 1)])),
    ("argv", lambda r: r.argv.extend(["a"] * (LIMITS.max_inputs + 1))),
    ("node_list", lambda r: setattr(r, "node_list", "n[0000000000000000-0000000099999999]")),
    ("node_list", lambda r: setattr(r, "node_list", "n[99999999999999999-99999999999999999999]")),
]


@pytest.mark.parametrize("field,grow", HUGE_FIELDS, ids=[f"{f}-{i}" for i, (f, _) in enumerate(HUGE_FIELDS)])
def test_large_valid_fields_are_refused_by_name(served, field, grow):
    daemon, client = served
    request = job()
    grow(request)
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as caught:
        client.stub.Predict(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details().startswith(field), caught.value.details()
    assert time.monotonic() - started < 5   # counted from the text, never expanded
    assert daemon.healthy()


def _stored_requests(store_path) -> dict[str, bytes]:
    db = sqlite3.connect(store_path)
    try:
        return {pid: bytes(request or b"") for pid, request in db.execute("SELECT prediction_id, request FROM predictions")}
    finally:
        db.close()


def test_what_is_stored_per_request_is_bounded_and_still_answers_at_allocation(served):
    daemon, client = served
    request = job(app="", script=_script(7, 1 << 20))
    request.environment.update({f"V{i}": "v" * 4000 for i in range(200)})   # 800 kB, within the limits
    submitted = client.stub.Predict(request, timeout=30)
    assert submitted.prediction_id and submitted.application == "lmp"
    client.admin.GetStatus(pb.StatusRequest(), timeout=10)   # commits the journal
    kept = _stored_requests(daemon.data_dir / "hpcpredict.sqlite")[submitted.prediction_id]
    assert 0 < len(kept) <= LIMITS.stored_request_bytes
    stored = pb.JobRequest.FromString(kept)
    assert not stored.environment and stored.script_bytes == len(request.script)
    assert stored.inputs["size"].number == 7.0
    assert hashlib.sha256(request.script).hexdigest().encode() in stored.script.splitlines()[-1]
    allocated = client.stub.PredictAtAllocation(pb.AllocationRequest(
        job_id="77", node_list="n[01-02]", prediction_id=submitted.prediction_id), timeout=30)
    assert allocated.application == "lmp" and allocated.runtime_s == pytest.approx(submitted.runtime_s, rel=0.5)


def test_small_requests_are_stored_whole():
    request = job(script=b"#!/bin/bash\nsrun lmp -in in.melt\n")
    request.environment["OMP_NUM_THREADS"] = "4"
    spec = job_spec_from_request(request, LIMITS)
    assert stored_request(request, spec, LIMITS) == request.SerializeToString()


def test_requests_too_large_even_when_reduced_keep_no_body():
    request = job()
    for index in range(LIMITS.max_inputs):
        request.inputs[f"k{index}"].text = "v" * 4000
    spec = job_spec_from_request(request, LIMITS)
    assert stored_request(request, spec, LIMITS) == b""


def _row(prediction_id: str, created: float) -> PredictionRow:
    return PredictionRow(prediction_id=prediction_id, job_id="", stage="submit", user="u", application="a",
                         created=created, runtime_s=1, low_s=1, high_s=1, bound_s=1, requested_time_s=0,
                         comm_time_s=None, model_name="m", model_version="1", fallback=False)


def test_retention_deletes_old_rows_and_the_oldest_beyond_the_cap(tmp_path):
    store = SQLiteStore(str(tmp_path / "s.sqlite"))
    now = time.time()
    for index in range(10):
        store.record_prediction(_row(f"old{index}", now - 100 * 86400 - index))
    for index in range(30):
        store.record_prediction(_row(f"new{index:02d}", now - 30 + index))
    assert store.prune_predictions(keep_days=90, keep_rows=0) == 10
    assert store.prune_predictions(keep_days=90, keep_rows=20) == 10
    assert store.counts()["predictions"] == 20
    assert store.prediction("new09") is None and store.prediction("new10") is not None
    store.close()


def test_the_daemon_applies_retention(world_dir):
    store_path = world_dir / "hpcpredict.sqlite"
    seed = SQLiteStore(str(store_path))
    for index in range(5):
        seed.record_prediction(_row(f"ancient{index}", time.time() - 400 * 86400))
    seed.close()
    daemon, client = start(world_dir, HPCPREDICT_STORE_KEEP_PREDICTIONS_DAYS="365")
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and client.admin.GetStatus(pb.StatusRequest(), timeout=10).predictions:
            time.sleep(0.2)
        assert client.admin.GetStatus(pb.StatusRequest(), timeout=10).predictions == 0
    finally:
        client.close()
        daemon.stop()


def test_validation_names_the_environment_value():
    request = job()
    request.environment["PATH"] = "p" * (LIMITS.max_text_bytes + 1)
    with pytest.raises(InvalidRequest) as caught:
        job_spec_from_request(request, LIMITS)
    assert caught.value.field == "environment['PATH']"


@pytest.mark.parametrize("x,warned", [(10, False), (1_000_000, True)], ids=["inside", "far-outside"])
def test_inputs_far_outside_the_training_range_are_flagged(world_dir, tmp_path, x, warned):
    from hpcpredict.daemon.registry import ModelRegistry
    from tests.robustness.test_faults import _runtime_model

    ModelRegistry(world_dir / "models").publish("runtime", _runtime_model(tmp_path / "m"))
    daemon, client = start(world_dir)
    try:
        script = (f"#!/bin/bash\n#HPCPREDICT x={x} y=10 z=10 steps=300 cutoff=2.5\nsrun lmp -in in.melt\n").encode()
        answer = client.stub.Predict(job(script=script), timeout=30)
        assert answer.model_name.startswith("runtime-")
        flagged = [line for line in answer.explanation if "far outside the training range" in line]
        assert bool(flagged) == warned, list(answer.explanation)
    finally:
        client.close()
        daemon.stop()
