"""The prediction journal: records survive a killed process, torn writes are cut off, and the
store commits journaled predictions in batches without losing one while SQLite refuses them."""
from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hpcpredict.daemon.errors import StoreError
from hpcpredict.daemon.store import JournalFile, PredictionRow, SQLiteStore, decode_row, encode_row, prediction_values


def _row(number: int, **changes) -> PredictionRow:
    values = dict(prediction_id=f"p{number:06d}", job_id=str(1000 + number), stage="submit", user="ålice",
                  application="lmp", created=1.7e9 + number, runtime_s=120.5, low_s=90.0, high_s=150.0,
                  bound_s=200.0, requested_time_s=3600.0, comm_time_s=None, model_name="m", model_version="7",
                  fallback=bool(number % 2), request=b"\x00\xffscript" * (number % 5))
    values.update(changes)
    return PredictionRow(**values)


@pytest.mark.parametrize("changes", [{}, {"comm_time_s": 3.25}, {"request": b""}, {"request": b"x" * 100_000},
                                     {"user": "", "job_id": "", "model_version": "µ-1"}, {"cluster": "tetralith"},
                                     {"decided_time_min_s": 2520, "policy_mode": "soft", "policy_reason": "soft_time_min"},
                                     {"decided_time_limit_s": 600, "policy_mode": "bound", "policy_reason": "time_limit",
                                      "cluster": "x"},
                                     {"stage": "allocation", "decided_time_limit_s": 540, "started_time_limit_s": 1200,
                                      "started_time_min_s": 240, "policy_reason": "allocation_time_limit"},
                                     {"stage": "allocation", "started_time_limit_s": 240},
                                     {"suggested_time_limit_s": 420, "policy_mode": "advise"}])
def test_row_codec_round_trip(changes):
    params = prediction_values(_row(3, **changes))
    assert decode_row(encode_row(params)) == params


def test_records_journaled_before_the_limits_decode_without_them():
    params = prediction_values(_row(2, cluster="tetralith", decided_time_min_s=600, policy_mode="bound", policy_reason="x"))
    data = encode_row(params)
    older = data[:data.index(b"tetralith") + len("tetralith") + 4]   # up to the cluster's length
    assert decode_row(older) == params[:17] + (None, None, "", "", None, None, None)


def test_records_journaled_before_the_started_limits_decode_without_them():
    """A journal an older daemon left (limits block ``u32 u32 mode NUL reason``) replays after an upgrade."""
    import struct

    params = prediction_values(_row(2, cluster="c", decided_time_min_s=600, policy_mode="bound", policy_reason="time_min"))
    data = encode_row(params)
    head = data[:data.index(b"c\x01\x00\x00\x00") + 5]    # up to the cluster's length
    block = struct.pack("<II", 0, 600) + b"bound\0time_min"
    older = head + block + struct.pack("<I", len(block))
    assert decode_row(older) == params[:21] + (None, None, None)
    assert decode_row(older)[18] == 600


def test_records_journaled_before_the_suggestion_decode_without_it():
    """A journal of the release before the suggested --time was kept (started limits, no suggestion)."""
    import struct

    params = prediction_values(_row(2, cluster="c", decided_time_min_s=600, policy_mode="bound", policy_reason="time_min",
                                    started_time_limit_s=1200, suggested_time_limit_s=900))
    data = encode_row(params)
    head = data[:data.index(b"c\x01\x00\x00\x00") + 5]
    block = struct.pack("<II", 0, 600) + b"bound\0time_min\0" + struct.pack("<II", 1200, 0)
    older = head + block + struct.pack("<I", len(block))
    assert decode_row(older) == params[:23] + (None,)
    assert decode_row(data)[23] == 900


def test_row_codec_refuses_bytes_that_are_not_a_row():
    data = encode_row(prediction_values(_row(1)))
    for broken in (data[:10], data[:-1], data + b"z"):
        with pytest.raises(ValueError):
            decode_row(broken)


def test_torn_record_and_older_generation_are_not_replayed(tmp_path):
    path = str(tmp_path / "j")
    journal = JournalFile.open(path, 1 << 16)
    for payload in (b"one", b"two", b"three"):
        assert journal.append(payload)
    journal.close()
    with open(path, "r+b") as handle:   # the process died while copying "three": its last byte differs
        data = handle.read()
        handle.seek(data.index(b"three") + 4)
        handle.write(b"X")
    journal = JournalFile.open(path, 1 << 16)
    assert journal.records() == [b"one", b"two"]
    assert journal.append(b"four")   # appends after the last valid record, over the torn one
    assert journal.records() == [b"one", b"two", b"four"]
    journal.reset()   # committed elsewhere: the bytes stay, a new generation ignores them
    assert journal.records() == []
    assert journal.append(b"five")
    journal.close()
    assert JournalFile.open(path, 1 << 16).records() == [b"five"]


def test_a_smaller_configured_size_keeps_what_a_crash_left(tmp_path):
    path = str(tmp_path / "j")
    journal = JournalFile.open(path, 1 << 16)
    payloads = [bytes([i]) * 1000 for i in range(20)]   # 20 kB of records
    assert all(journal.append(p) for p in payloads)
    journal.close()
    assert JournalFile.open(path, 4096).records() == payloads


def test_full_journal_says_so_and_a_second_process_cannot_open_it(tmp_path):
    path = str(tmp_path / "j")
    journal = JournalFile.open(path, 256)
    assert journal.append(b"a" * 100)
    assert not journal.append(b"b" * 200)
    with pytest.raises(StoreError, match="too small"):
        JournalFile.open(str(tmp_path / "tiny"), 16)
    locker = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        from hpcpredict.daemon.store import JournalFile
        from hpcpredict.daemon.errors import StoreError
        try:
            JournalFile.open({path!r}, 256)
        except StoreError as error:
            print(error)
        """)], capture_output=True, text=True, timeout=60)
    assert "in use by another process" in locker.stdout
    journal.close()


def test_journaled_predictions_are_readable_at_once_and_committed_in_batches(tmp_path):
    store = SQLiteStore(str(tmp_path / "s.sqlite"), journal_bytes=1 << 20, flush_delay_s=30.0)
    rows = [_row(i) for i in range(50)]
    for row in rows:
        store.record_prediction(row)
    in_sqlite = sqlite3.connect(tmp_path / "s.sqlite").execute("SELECT COUNT(*) FROM predictions").fetchone()[0]
    assert in_sqlite == 0   # still in the journal (the flusher waits 30 s here)
    assert store.prediction("p000007") == rows[7]   # but already answerable (the prolog asks by id)
    assert store.counts()["predictions"] == 50      # a reader's flush commits them
    assert store.prediction("p000007") == rows[7]   # now from SQLite
    assert store.prediction("p999999") is None
    store.close()


def test_journal_keeps_predictions_while_the_store_refuses_them(tmp_path):
    faults: list = []

    class Owner:   # the store's events as the daemon's service receives them (service.py)
        def journal_opened(self, error):
            pass

        def journal_committed(self, error):
            faults.append(error)

    store = SQLiteStore(str(tmp_path / "s.sqlite"), journal_bytes=1 << 20, flush_delay_s=30.0)
    store.events = Owner()
    blocker = sqlite3.connect(tmp_path / "s.sqlite", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")   # another writer holds the lock: commits fail after the busy wait
    for i in range(10):
        store.record_prediction(_row(i))
    assert not store.flush()
    assert faults and "locked" in faults[-1]
    store.record_prediction(_row(10))    # the next rows go on being kept
    blocker.execute("ROLLBACK")
    blocker.close()
    assert store.flush()
    assert faults[-1] is None            # the fault is cleared once the rows are in
    db = sqlite3.connect(tmp_path / "s.sqlite")
    assert db.execute("SELECT COUNT(*) FROM predictions").fetchone()[0] == 11
    db.close()
    store.close()


def test_a_full_journal_falls_back_to_direct_writes(tmp_path):
    store = SQLiteStore(str(tmp_path / "s.sqlite"), journal_bytes=4096, flush_delay_s=30.0)
    for i in range(40):   # ~100-byte rows: the two 4 KiB files cannot hold them all
        store.record_prediction(_row(i, request=b""))
    assert all(store.prediction(f"p{i:06d}") is not None for i in range(40))
    store.close()
    db = sqlite3.connect(tmp_path / "s.sqlite")
    assert db.execute("SELECT COUNT(*) FROM predictions").fetchone()[0] == 40
    db.close()


WRITER = textwrap.dedent("""
    import sys
    from hpcpredict.daemon.store import SQLiteStore
    from tests.daemon.test_journal import _row
    store = SQLiteStore(sys.argv[1], journal_bytes=1 << 20, flush_delay_s=3600.0)
    for i in range(int(sys.argv[2])):
        store.record_prediction(_row(i))
    print("written", flush=True)
    sys.stdin.read()   # wait to be killed
""")


def test_kill9_before_any_commit_loses_nothing(tmp_path):
    """A real process journals predictions and is killed before it commits one of them."""
    path = str(tmp_path / "s.sqlite")
    writer = subprocess.Popen([sys.executable, "-c", WRITER, path, "300"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=str(Path(__file__).resolve().parents[2]))
    try:
        assert writer.stdout.readline().strip() == "written"
        writer.send_signal(signal.SIGKILL)
        writer.wait(30)
    finally:
        writer.stdout.close()
        writer.stdin.close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM predictions").fetchone()[0] == 0   # nothing committed before the kill
    db.close()
    store = SQLiteStore(path, journal_bytes=1 << 20)   # the next start replays the journal
    assert store.counts()["predictions"] == 300
    assert store.prediction("p000123") == _row(123)
    store.close()
    store = SQLiteStore(path, journal_bytes=1 << 20)   # ...once: the journal was reset after the commit
    assert store.counts()["predictions"] == 300
    store.close()


def test_a_zero_comm_time_stays_zero_not_missing():
    assert decode_row(encode_row(prediction_values(_row(2, comm_time_s=0.0))))[11] == 0.0


def test_a_record_journaled_before_clusters_decodes_with_no_cluster():
    """Journals left by a daemon from before the cluster column (records end at the request)
    are still committed at the next start, on cluster ''."""
    params = prediction_values(_row(4))
    # the same record without the cluster trailer (4) and the limits block (8 + "" NUL "" NUL + 8, its length 4)
    older = encode_row(params)[:-(4 + 8 + 2 + 8 + 4)]
    assert decode_row(older) == params
    with pytest.raises(ValueError):
        decode_row(older + b"\x01")
