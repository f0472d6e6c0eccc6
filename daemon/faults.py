"""The fault board: the one place that says what is wrong with the running daemon.

A fault belongs to a component (``store``, ``models``) and to the operation that found it
(``record outcome``, ``history replay``...). The operation that failed sets it; only the same
operation succeeding clears it, so one kind of write that works again (a Predict's record)
never hides another that still fails (outcomes on a full disk). GetStatus lists the board and
the ``hpcpredict_fault`` metric reads it when scraped (:mod:`.listeners.metrics`); nobody copies it.

>>> board = FaultBoard()
>>> board.set("store", "record outcome", "database or disk is full")
>>> board.clear("store", "record prediction")   # another operation's success changes nothing
False
>>> board.lines()
['store: record outcome: database or disk is full']
>>> board.clear("store", "record outcome"), board.lines()
(True, [])
"""
from __future__ import annotations

import logging
import threading

logger = logging.getLogger(__name__)


class FaultBoard:
    def __init__(self):
        self._faults: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def set(self, component: str, operation: str, message: str) -> None:
        with self._lock:
            new = self._faults.get((component, operation)) is None
            self._faults[(component, operation)] = message
        if new:
            logger.warning("fault: %s: %s: %s", component, operation, message)

    def clear(self, component: str, operation: str) -> bool:
        """Forget the fault of that operation; True when there was one."""
        if not self._faults:   # the common case, without the lock
            return False
        with self._lock:
            cleared = self._faults.pop((component, operation), None) is not None
        if cleared:
            logger.warning("fault cleared: %s: %s", component, operation)
        return cleared

    def has(self, component: str, operation: str | None = None) -> bool:
        with self._lock:
            return any(c == component and operation in (None, o) for c, o in self._faults)

    def items(self) -> list[tuple[str, str, str]]:
        """(component, operation, message), sorted."""
        with self._lock:
            return sorted((c, o, m) for (c, o), m in self._faults.items())

    def lines(self) -> list[str]:
        return [f"{c}: {o}: {m}" for c, o, m in self.items()]

    def __bool__(self) -> bool:
        return bool(self._faults)
