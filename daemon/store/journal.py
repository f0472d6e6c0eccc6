"""Prediction records off Predict's path, without losing one: a memory-mapped journal.

A single-row SQLite transaction per Predict takes the WAL locks and writes its pages while
the caller waits; on the local socket, under load, that holds a hook worker long enough that
more submissions are turned away as busy and p99 doubles (``python -m benchmarks run journal``
compares both on the same machine, interleaved). Here the row is copied into a file mapped with ``MAP_SHARED``
instead: once the copy is done the bytes are in the kernel's page cache, so a ``kill -9`` of
the daemon cannot lose them (a power cut can lose the last seconds, exactly as SQLite's
``synchronous=NORMAL`` may for these rows). A background thread moves them into SQLite in
batches, one transaction per batch.

Two files alternate (``<store>.journal-0`` and ``-1``): the writers fill the active one; a
flush switches to the other, commits what the old one holds, then resets the old one by
raising its generation in the header (records of an older generation are ignored). A crash at
any point leaves every record either committed or still valid in a file, and replaying a
record twice is harmless (``INSERT OR REPLACE`` on the prediction id).

Layout of a file: a 64-byte header (``HPJ1``, format version, generation) and records
``<magic u32, payload length u32, generation u64, crc32 u32>`` + payload, one after another.
The file is preallocated (``posix_fallocate``): a write into a mapped page the file system
cannot back would kill the process with SIGBUS instead of failing.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "j")
>>> journal = JournalFile.open(path, 4096)
>>> journal.append(b"first") and journal.append(b"second")
True
>>> journal.close(); journal = JournalFile.open(path, 4096)   # as a restarted daemon finds it
>>> journal.records()
[b'first', b'second']
>>> journal.reset(); journal.close(); JournalFile.open(path, 4096).records()
[]
"""
from __future__ import annotations

import fcntl
import math
import mmap
import os
import struct
import zlib

from ..errors import StoreError

_HEADER = struct.Struct("<4sIQ")         # magic, format version, generation
_HEADER_BYTES = 64
_RECORD = struct.Struct("<IIQI")          # magic, payload length, generation, crc32 of the payload
_RECORD_MAGIC = 0x4A524543               # "CERJ"
_FILE_MAGIC = b"HPJ1"
_VERSION = 1


class JournalFile:
    """One preallocated, memory-mapped, append-only file. Not thread-safe: the caller locks."""

    def __init__(self, path: str, handle: int, mapped: mmap.mmap, size: int, generation: int):
        self.path, self._fd, self._map, self.size = path, handle, mapped, size
        self.generation = generation
        self.offset = _HEADER_BYTES

    @classmethod
    def open(cls, path: str, size: int) -> "JournalFile":
        """Open or create ``path`` at ``size`` bytes, locked against a second daemon."""
        if size < _HEADER_BYTES + _RECORD.size + 1:
            raise StoreError(f"journal {path}: {size} bytes is too small")
        try:
            handle = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as error:
            raise StoreError(f"journal {path}: cannot open: {error}") from error
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            os.close(handle)
            raise StoreError(f"journal {path}: in use by another process ({error})") from error
        try:
            # never shrink a journal: a smaller configured size must not cut off records a crash
            # left; a file without a journal's header (a preparation that failed on a full disk)
            # holds none and takes the configured size again
            if os.pread(handle, len(_FILE_MAGIC), 0) == _FILE_MAGIC:
                size = max(size, os.fstat(handle).st_size)
            if os.fstat(handle).st_size != size:
                os.ftruncate(handle, size)
            os.posix_fallocate(handle, 0, size)
            mapped = mmap.mmap(handle, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as error:
            os.close(handle)
            raise StoreError(f"journal {path}: cannot prepare {size} bytes: {error}") from error
        magic, version, generation = _HEADER.unpack_from(mapped, 0)
        if magic != _FILE_MAGIC or version != _VERSION:
            generation = 1   # new (zero-filled) or foreign file: start a journal, nothing to recover
            _HEADER.pack_into(mapped, 0, _FILE_MAGIC, _VERSION, generation)
        journal = cls(path, handle, mapped, size, generation)
        journal.offset = journal._scan_end()
        return journal

    def _scan_end(self) -> int:
        """Offset after the last valid record of the current generation."""
        offset = _HEADER_BYTES
        for offset, _ in self._walk():
            pass
        return offset

    def _walk(self):
        """(end offset, payload) of each valid record of the current generation, in order."""
        mapped, offset = self._map, _HEADER_BYTES
        while offset + _RECORD.size <= self.size:
            magic, length, generation, crc = _RECORD.unpack_from(mapped, offset)
            start = offset + _RECORD.size
            if magic != _RECORD_MAGIC or generation != self.generation or start + length > self.size:
                return
            payload = mapped[start:start + length]
            if zlib.crc32(payload) != crc:
                return   # torn write: the process died while copying this record
            offset = start + length
            yield offset, payload

    def records(self) -> list[bytes]:
        """Every valid record of the current generation (what a restart must replay)."""
        return [payload for _, payload in self._walk()]

    def append(self, payload: bytes) -> bool:
        """Copy one record in; False when it does not fit (the caller writes it elsewhere)."""
        end = self.offset + _RECORD.size + len(payload)
        if end > self.size:
            return False
        # Payload first, header last: a record whose header is complete has its payload too
        # (the CRC catches the rest).
        self._map[self.offset + _RECORD.size:end] = payload
        _RECORD.pack_into(self._map, self.offset, _RECORD_MAGIC, len(payload), self.generation, zlib.crc32(payload))
        self.offset = end
        return True

    def reset(self) -> None:
        """Forget every record (they are committed elsewhere): a new generation."""
        self.generation += 1
        _HEADER.pack_into(self._map, 0, _FILE_MAGIC, _VERSION, self.generation)
        self.offset = _HEADER_BYTES

    @property
    def empty(self) -> bool:
        return self.offset == _HEADER_BYTES

    def close(self) -> None:
        try:
            self._map.close()
        finally:
            os.close(self._fd)


# ---------------------------------------------------------------------- row codec
# A prediction row: 7 texts, 7 floats (comm_time_s may be None → NaN), a flag, the request bytes,
# then the cluster name and its length (records written before clusters end at the request and
# decode with cluster ''), then the limits decided (two u32, mode NUL reason [NUL the limits the
# job started under: two u32]) and their length (records written before end at the cluster and
# decode with no limits, mode and reason ''; records written before the started limits end at the
# reason and decode with none; then the --time suggested, a u32, absent in records written before it).
_TEXTS = (0, 1, 2, 3, 4, 12, 13)            # prediction_id, job_id, stage, user, application, model name/version
_FLOATS = (5, 6, 7, 8, 9, 10, 11)           # created, runtime, low, high, bound, requested, comm
_FIXED = struct.Struct("<7dB7I I")          # floats, fallback, text lengths, request length
_ROW_LENGTH = 24
_CLUSTER_LENGTH = struct.Struct("<I")
_LIMITS = struct.Struct("<II")              # decided time limit, decided time min (0 = none)
_STARTED = struct.Struct("<II")             # the time limit and time min the job started under (0 = not read)
_SUGGESTED = struct.Struct("<I")            # the --time suggested (0 = none)


def encode_row(row: tuple) -> bytes:
    """Bytes of one ``predictions`` row (the INSERT's parameter tuple)."""
    texts = [row[i].encode() for i in _TEXTS]
    request = row[15] or b""
    cluster = row[16].encode()
    comm = row[11]
    limits = _LIMITS.pack(row[17] or 0, row[18] or 0) + f"{row[19]}\0{row[20]}\0".encode() + \
        _STARTED.pack(row[21] or 0, row[22] or 0) + _SUGGESTED.pack(row[23] or 0)
    return b"".join((_FIXED.pack(row[5], row[6], row[7], row[8], row[9], row[10],
                                 math.nan if comm is None else comm, 1 if row[14] else 0,
                                 *map(len, texts), len(request)), *texts, request, cluster,
                         _CLUSTER_LENGTH.pack(len(cluster)), limits, _CLUSTER_LENGTH.pack(len(limits))))


def decode_row(data: bytes) -> tuple:
    """Inverse of :func:`encode_row` (ValueError on bytes that are not one)."""
    try:
        *floats, fallback = _FIXED.unpack_from(data, 0)[:8]
        lengths = _FIXED.unpack_from(data, 0)[8:]
    except struct.error as error:
        raise ValueError(f"journal record too short: {error}") from error
    if _FIXED.size + sum(lengths) > len(data):
        raise ValueError("journal record shorter than its fields")
    row: list = [None] * _ROW_LENGTH
    offset = _FIXED.size
    for index, length in zip(_TEXTS, lengths):
        row[index] = data[offset:offset + length].decode()
        offset += length
    for index, value in zip(_FLOATS, floats):
        row[index] = value
    if math.isnan(row[11]):
        row[11] = None
    row[14] = int(fallback)
    row[15] = data[offset:offset + lengths[-1]]
    rest = data[offset + lengths[-1]:]
    row[17:24] = None, None, "", "", None, None, None
    if len(rest) >= _CLUSTER_LENGTH.size:
        size = _CLUSTER_LENGTH.unpack_from(rest, len(rest) - _CLUSTER_LENGTH.size)[0]
        if size != len(rest) - _CLUSTER_LENGTH.size:   # a limits block after the cluster
            if size < _LIMITS.size or size + 2 * _CLUSTER_LENGTH.size > len(rest):
                raise ValueError("journal record length does not match its fields")
            block = rest[len(rest) - _CLUSTER_LENGTH.size - size:-_CLUSTER_LENGTH.size]
            limit, time_min = _LIMITS.unpack_from(block, 0)
            mode, _, rest_of_block = block[_LIMITS.size:].partition(b"\0")
            reason, has_started, started = rest_of_block.partition(b"\0")
            started_limit = started_min = suggested = 0
            if has_started:
                if len(started) not in (_STARTED.size, _STARTED.size + _SUGGESTED.size):
                    raise ValueError("journal record length does not match its fields")
                started_limit, started_min = _STARTED.unpack_from(started)
                if len(started) > _STARTED.size:
                    suggested = _SUGGESTED.unpack_from(started, _STARTED.size)[0]
            row[17:24] = (limit or None, time_min or None, mode.decode(), reason.decode(), started_limit or None,
                          started_min or None, suggested or None)
            rest = rest[:len(rest) - _CLUSTER_LENGTH.size - size]
    if rest and (len(rest) < _CLUSTER_LENGTH.size or
                 _CLUSTER_LENGTH.unpack_from(rest, len(rest) - _CLUSTER_LENGTH.size)[0] != len(rest) - _CLUSTER_LENGTH.size):
        raise ValueError("journal record length does not match its fields")
    row[16] = rest[:-_CLUSTER_LENGTH.size].decode() if rest else ""
    return tuple(row)
