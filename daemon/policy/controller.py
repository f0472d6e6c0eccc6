"""Which :mod:`~hpcpredict.daemon.policy.limits` mode the daemon answers with.

``[policy] mode``: ``bound`` and ``advise`` are taken as configured. ``soft`` (and ``auto``,
which means soft where possible, else advise) reaches a job only while the controller's live
configuration (``scontrol show config``) has ``time_min_as_soft_limit`` in its
SchedulerParameters: without it a ``--time-min`` is a kill limit, and a point estimate set there
would kill about every other backfilled job. The check runs on a background thread every
``controller_check_s``, never on the request path; until it has an answer, and whenever it
cannot tell, the mode is ``advise``. (The submission hook checks its own slurm.conf too.)

>>> scheduler_parameters("SchedulerParameters     = time_min_as_soft_limit,bf_interval=2\\n")
'time_min_as_soft_limit,bf_interval=2'
>>> soft_limit_enabled("bf_interval=2,time_min_as_soft_limit"), soft_limit_enabled("(null)")
(True, False)
"""
from __future__ import annotations

import logging
import shlex
import threading
import time
from typing import Callable

from ..commands import run_command
from ..errors import HpcPredictError

logger = logging.getLogger(__name__)

SOFT_OPTION = "time_min_as_soft_limit"


def scheduler_parameters(show_config: str) -> str | None:
    """The SchedulerParameters value in ``scontrol show config`` output; None when absent."""
    for line in show_config.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "SchedulerParameters":
            return value.strip()
    return None


def soft_limit_enabled(parameters: str) -> bool:
    return SOFT_OPTION in (item.strip() for item in parameters.split(","))


def _run(command: list[str], timeout: float) -> str:
    return run_command(command, timeout=timeout)


class PolicyMode:
    """The configured mode resolved against the controller: :meth:`current` never blocks."""

    def __init__(self, policy, *, run: Callable[[list[str], float], str] = _run):
        self.configured = policy.mode
        self.interval_s = policy.controller_check_s
        self.command = shlex.split(policy.controller_config_command)
        self._run = run
        self._soft_ok: bool | None = None      # None: not known (yet)
        self._why = "controller configuration not read yet"
        self._checked = 0.0
        self._logged: tuple[str, str] | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def needs_controller(self) -> bool:
        return self.configured in ("soft", "auto")

    def current(self) -> tuple[str, str]:
        """(mode, why): the mode to decide with now, and why it is that one."""
        if not self.needs_controller:
            return self.configured, f"[policy] mode = {self.configured}"
        stale = self._soft_ok is not None and time.monotonic() - self._checked > 3 * self.interval_s
        if self._soft_ok and not stale:
            return "soft", f"the controller runs with {SOFT_OPTION}"
        return "advise", ("controller configuration not re-read for too long" if stale else self._why)

    def refresh(self) -> None:
        """Read the controller's configuration now (blocking: call it off the request path)."""
        try:
            parameters = scheduler_parameters(self._run(self.command, 10.0))
        except (HpcPredictError, OSError) as error:
            self._soft_ok, self._why = None, f"cannot read the controller's configuration: {error}"
        else:
            if parameters is None:
                self._soft_ok, self._why = None, "no SchedulerParameters in the controller's configuration"
            else:
                self._soft_ok = soft_limit_enabled(parameters)
                self._why = "" if self._soft_ok else f"the controller runs without {SOFT_OPTION}"
        self._checked = time.monotonic()
        resolved = self.current()
        if resolved != self._logged:   # once per change, not every check
            self._logged = resolved
            logger.info("policy mode %s (configured %s): %s", resolved[0], self.configured, resolved[1])

    def start(self) -> "PolicyMode":
        if self.needs_controller and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="policy-mode", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(self.interval_s)
