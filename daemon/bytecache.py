"""A least-recently-used cache bounded by bytes, not by entries.

An entry-count bound says nothing about memory when the entries are caller-sized: 4,096
cached parses keyed on whole 1 MiB job scripts hold 4 GiB. Here the key is a digest (the
caller hashes what it would have kept), every value is charged its estimated size, and the
oldest entries go until the total fits ``max_bytes``. A value larger than an eighth of the
budget is not cached at all, so one request can never evict everything else.

>>> cache = ByteBoundedCache(max_bytes=1000)
>>> for i in range(20): cache.put(bytes([i]), i, 99)     # 100 bytes each with its key
>>> len(cache), cache.bytes, cache.get(bytes([0])), cache.get(bytes([19]))
(10, 1000, None, 19)
>>> cache.put(b"big", "x", 200); cache.get(b"big") is None   # more than max_bytes / 8
True
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any


class ByteBoundedCache:
    def __init__(self, max_bytes: int):
        self.max_bytes = int(max_bytes)
        self.bytes = 0
        self._entries: OrderedDict[bytes, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: bytes):
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: bytes, value, size: int) -> None:
        size = int(size) + len(key)   # the caller's estimate of the value, plus the key
        if size > self.max_bytes // 8:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self._entries[key] = (value, size)
            self.bytes += size
            while self.bytes > self.max_bytes:
                _, (_, freed) = self._entries.popitem(last=False)
                self.bytes -= freed

    def resize(self, max_bytes: int) -> None:
        """Change the budget (the config can differ between callers); evicts at once."""
        with self._lock:
            self.max_bytes = int(max_bytes)
            while self.bytes > self.max_bytes and self._entries:
                _, (_, freed) = self._entries.popitem(last=False)
                self.bytes -= freed

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)
