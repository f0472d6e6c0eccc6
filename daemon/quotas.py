"""What a Predict may add to the store: a budget of stored bytes per user, a cap on the whole store.

Every Predict is answered; these bounds only decide what is *kept* of it. An ordinary user
(any uid that is not a history writer) has a token bucket of stored bytes
(``[store] user_stored_bytes_per_hour``, refilled continuously, at most one hour's worth
banked). A prediction row costs :data:`ROW_BYTES` plus its request. When the bucket cannot
pay for the request, the row is kept without it; when it cannot pay even for the bare row,
nothing is kept and the answer carries no prediction id (as when the store is down).

The request is dropped whole, not cut shorter: a user's own Predict is a what-if (the
submissions Slurm accepts are predicted by the submit hook, a history writer, whose rows are
never limited), and the stored request is read back only by calls that name a prediction id
(allocation, runtime features, outcomes), which the hooks make for their own rows. A cut
request could be wrong when re-read; a missing one is refused clearly. So past the budget a
flood costs :data:`ROW_BYTES` per call until the bucket is empty, then nothing.

The history writers' own rows (the Slurm hooks': root, SlurmUser, admins) have a budget too,
``[store] writer_stored_kib_per_hour`` per uid (0: none), because a user who submits through
``sbatch`` as fast as slurmctld takes jobs makes the submit hook store ~15 KB a job. Past it a
row keeps the compact request (no environment, no script: what outcomes and allocation-time
predictions read back), then no request; the row itself, the link of the job's outcome to its
prediction, is always kept (512 bytes per job Slurm accepted, bounded by Slurm's job rate).

>>> hooks = StoredBytesBudget(bytes_per_hour=20000, clock=lambda: 0.0)
>>> [hooks.choose(0, (ROW_BYTES + 15000, ROW_BYTES + 1500, ROW_BYTES)) for _ in range(4)]   # whole, compact, bare
[0, 1, 1, 2]

The store cap (``[store] max_store_mib``, and ``min_free_mib`` left on its file system) is
checked every few seconds, not on every call: once reached, ordinary users' predictions are
not kept at all and the hooks' keep their requests in the compact form (no environment, no
script: what outcomes and allocation-time predictions read back), so outcomes, the history
itself, go on being stored while the disk still has room. The daemon reports it as the
fault ``store: size cap`` until the store is back under the cap.

>>> budget = StoredBytesBudget(bytes_per_hour=2000, clock=lambda: 0.0)
>>> [budget.allow(7, ROW_BYTES + 900) for _ in range(3)]   # the row with its request, the bare row, nothing
['request', 'row', 'none']
>>> budget.allow(8, ROW_BYTES)   # another user has a bucket of their own
'request'
"""
from __future__ import annotations

import os
import threading
import time

#: What a prediction row costs beyond its request: its columns, its index entries, page slack.
ROW_BYTES = 512
#: Users whose bucket is remembered; beyond, the fullest (idle) ones are forgotten (a full
#: bucket is what a forgotten user gets back, so forgetting one never gives more than a refill).
MAX_TRACKED_USERS = 65536
#: How often the size of the store is looked at (stat calls, not on every Predict).
CAP_CHECK_S = 5.0


class StoredBytesBudget:
    """Per-uid token buckets of stored bytes. Thread-safe; O(1) per call."""

    def __init__(self, bytes_per_hour: int, clock=time.monotonic):
        self.capacity = float(bytes_per_hour)
        self.rate = bytes_per_hour / 3600.0
        self._clock = clock
        self._buckets: dict[int, tuple[float, float]] = {}   # uid -> (bytes left, when)
        self._lock = threading.Lock()

    def allow(self, uid: int, cost: int) -> str:
        """Charge ``uid`` for a row of ``cost`` bytes: "request" (keep it all), "row" (keep the
        row without its request: :data:`ROW_BYTES` charged) or "none" (keep nothing)."""
        return ("request", "row", "none")[self.choose(uid, (cost, ROW_BYTES))]

    def choose(self, uid: int, costs: tuple[int, ...]) -> int:
        """Charge ``uid`` for the first of ``costs`` (bytes, most kept first) its bucket can pay:
        its index, or ``len(costs)`` when none (nothing charged)."""
        now = self._clock()
        with self._lock:
            left, then = self._buckets.get(uid, (self.capacity, now))
            left = min(self.capacity, left + (now - then) * self.rate)
            chosen = next((index for index, cost in enumerate(costs) if left >= cost), len(costs))
            if chosen < len(costs):
                left -= costs[chosen]
            if uid not in self._buckets and len(self._buckets) >= MAX_TRACKED_USERS:
                self._forget_idle(now)
            self._buckets[uid] = (left, now)
        return chosen

    def _forget_idle(self, now: float) -> None:
        full = [uid for uid, (left, then) in self._buckets.items()
                if left + (now - then) * self.rate >= self.capacity]
        for uid in full or list(self._buckets)[:len(self._buckets) // 2]:
            del self._buckets[uid]


class StoreCap:
    """Is the store at its cap? Size of its files against ``max_bytes`` (0: no cap) and free
    space of its file system against ``min_free_bytes`` (0: not checked), looked at most every
    :data:`CAP_CHECK_S`. ``paths`` are the store's files (the first one's directory is the file
    system checked); an empty tuple (a server database such as PostgreSQL) is never capped."""

    def __init__(self, paths: tuple[str, ...], max_bytes: int, min_free_bytes: int, clock=time.monotonic):
        self.paths, self.max_bytes, self.min_free_bytes = paths, max_bytes, min_free_bytes
        self._clock = clock
        self._next = 0.0
        self.reason: str | None = None   # why the cap is reached; None: under it

    def reached(self) -> str | None:
        if not self.paths or (self.max_bytes <= 0 and self.min_free_bytes <= 0):
            return None
        now = self._clock()
        if now >= self._next:
            self._next = now + CAP_CHECK_S
            self.reason = self._measure()
        return self.reason

    def _measure(self) -> str | None:
        size = 0
        for path in self.paths:
            try:
                size += os.stat(path).st_blocks * 512   # what it takes on disk (journals are preallocated)
            except OSError:
                pass
        if self.max_bytes > 0 and size >= self.max_bytes:
            return f"store is {size >> 20} MiB, at its cap of {self.max_bytes >> 20} MiB ([store] max_store_mib)"
        if self.min_free_bytes > 0:
            try:
                info = os.statvfs(os.path.dirname(os.path.abspath(self.paths[0])))
            except OSError:
                return None
            free = info.f_bavail * info.f_frsize
            if free < self.min_free_bytes:
                return (f"{free >> 20} MiB free on the store's file system, under [store] min_free_mib "
                        f"{self.min_free_bytes >> 20}")
        return None
