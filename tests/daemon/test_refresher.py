"""The one thread that keeps a reading of Slurm fresh (daemon/refresher.py): it reads at once,
stops at once, outlives any failure of a read, and says each failure once per change."""
from __future__ import annotations

import logging
import threading
import time

from hpcpredict.daemon.errors import HpcPredictError
from hpcpredict.daemon.refresher import Refresher

LOGGER = logging.getLogger("tests.refresher")
WAIT_S = 60.0      # a bound on a wait that ends at once when it works, never a measure of speed


def _refresher(read, interval_s=3600.0):
    return Refresher(read, interval_s=interval_s, name="test-refresh", what="the test reading", logger=LOGGER,
                     unread="not read yet")


def test_the_first_read_is_at_start_and_stop_does_not_wait_for_the_interval():
    reads = threading.Event()
    refresher = _refresher(reads.set)             # an hour between reads
    assert refresher.error == "not read yet" and not refresher.running
    refresher.start()
    assert reads.wait(WAIT_S), "no read at start"
    assert refresher.error == ""
    refresher.stop(timeout_s=WAIT_S)              # would sit out the hour if stop did not end the wait
    assert not refresher.running


def test_a_read_that_raises_does_not_end_the_thread():
    count, done = [0], threading.Event()

    def read():
        count[0] += 1
        if count[0] == 5:
            done.set()
        if count[0] <= 2:
            raise HpcPredictError("squeue: Unable to contact slurm controller")
        if count[0] <= 4:
            raise KeyError("a bug")

    refresher = _refresher(read, interval_s=0.001)
    refresher.start()
    try:
        assert done.wait(WAIT_S), f"the thread stopped reading after {count[0]} reads"
        assert refresher.running
    finally:
        refresher.stop(timeout_s=WAIT_S)
    assert refresher.error == "" and not refresher.running


def test_a_failure_is_logged_once_per_change_and_a_bug_once_per_kind(caplog):
    outcomes = iter([HpcPredictError("down"), HpcPredictError("down"), HpcPredictError("still down"), None,
                     HpcPredictError("still down"), ValueError("x"), ValueError("y"), KeyError("z"), KeyError("z")])

    def read():
        outcome = next(outcomes)
        if outcome is not None:
            raise outcome

    refresher = _refresher(read)
    errors = []
    with caplog.at_level(logging.INFO, logger=LOGGER.name):
        for _ in range(9):
            refresher.attempt()
            errors.append(refresher.error)
    said = [(r.levelno, r.getMessage(), r.exc_info is not None) for r in caplog.records if r.name == LOGGER.name]
    assert said == [(logging.WARNING, "the test reading not refreshed: down", False),
                    (logging.WARNING, "the test reading not refreshed: still down", False),
                    (logging.WARNING, "the test reading not refreshed: still down", False),   # again after a success
                    (logging.ERROR, "the test reading failed", True),
                    (logging.ERROR, "the test reading failed", True)]                       # ValueError, KeyError
    assert errors == ["down", "down", "still down", "", "still down", "internal error: ValueError",
                      "internal error: ValueError", "internal error: KeyError", "internal error: KeyError"]


def test_the_policy_modes_thread_outlives_a_bug_in_its_read():
    """PolicyMode's thread is a Refresher's: a read that raises what no one expected (here the
    command runner) is followed by the next read, which sets the mode."""
    from hpcpredict.daemon.config import load_config
    from hpcpredict.daemon.policy.controller import PolicyMode
    from tests.daemon.slurm_configs import show_config

    calls = [0]

    def run(command, timeout):
        calls[0] += 1
        if calls[0] == 1:
            raise RuntimeError("a bug in the runner")
        return show_config()             # SchedulerParameters=time_min_as_soft_limit on 24.11: soft

    policy = load_config(None, environ={"HPCPREDICT_CONFIG_PATH": "", "HPCPREDICT_DATA_DIR": "/nonexistent",
                                        "HPCPREDICT_POLICY_MODE": "soft",
                                        "HPCPREDICT_POLICY_CONTROLLER_CHECK_S": "0.001"}).policy
    mode = PolicyMode(policy, run=run)
    mode.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while mode.current()[0] != "soft" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert mode.current()[0] == "soft", f"mode {mode.current()} after {calls[0]} reads"
    finally:
        mode.stop()
