"""A reading of Slurm kept fresh off the request path: one thread that reads every interval
(:class:`Refresher`), and the "say it once per change" that keeps its log short (:class:`OnChange`).

The controller's facts (:class:`~.policy.controller.PolicyMode`), the partitions and default
accounts (:class:`~.policy.slurm_defaults.SlurmDefaultsCache`) and the queue's forecast
(:class:`~.forecast.keeper.ForecastKeeper`) are each read on a thread of their own, so that a
request only ever reads what was kept. The read runs as soon as the thread starts, then every
``interval_s`` from one read's start to the next (a read longer than the interval is followed by
the next at once); :meth:`Refresher.stop` ends the wait at once. Every interval the same failure
would otherwise fill the log: an expected one (:class:`~.errors.HpcPredictError`: a command that
fails, a queue that cannot be read) is logged once per change of its words, a bug (any other
exception) with its traceback once per kind; the thread goes on either way.

>>> said = OnChange()
>>> [said(words) for words in ("down", "down", "up", "down")]
[True, False, True, True]
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from .errors import HpcPredictError


_UNSET = object()


class OnChange:
    """True when a value differs from the one last given (or from ``last``: by default, the
    first value given is a change)."""

    def __init__(self, last: object = _UNSET) -> None:
        self._last = last

    def __call__(self, value: object) -> bool:
        changed = value != self._last
        self._last = value
        return changed


class Refresher:
    """``read()`` every ``interval_s`` on a thread named ``name``, once :meth:`start` is called;
    a failure is logged on ``logger`` as "``what`` not refreshed: ..." (expected) or "``what``
    failed" (a bug, with its traceback). :attr:`error` says why the last read failed ("" = it
    worked; ``unread`` until the first read)."""

    def __init__(self, read: Callable[[], None], *, interval_s: float, name: str, what: str,
                 logger: logging.Logger, unread: str = "not read yet"):
        self._read = read
        self.interval_s = interval_s
        self.name = name
        self._what = what
        self._logger = logger
        self.error = unread
        self._said = OnChange()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def attempt(self) -> None:
        """One read now, on the caller's thread (blocking: off the request path); never raises
        but what is not an ``Exception`` (KeyboardInterrupt, SystemExit)."""
        try:
            self._read()
        except HpcPredictError as error:
            self.error = str(error)
            if self._said(self.error):
                self._logger.warning("%s not refreshed: %s", self._what, error)
            return
        except Exception as error:              # a bug: logged (once per kind), the thread goes on
            self.error = f"internal error: {type(error).__name__}"
            if self._said(self.error):
                self._logger.exception("%s failed", self._what)
            return
        self.error = ""
        self._said("")

    def start(self) -> None:
        """Start the thread (once: a second call does nothing)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float | None = None) -> None:
        """End the wait at once; the thread ends after the read under way, if any (``timeout_s``:
        wait so long for it, None: do not wait)."""
        self._stop.set()
        if timeout_s is not None and self._thread is not None:
            self._thread.join(timeout_s)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.attempt()
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - started)))


__all__ = ["OnChange", "Refresher"]
