"""The one Python duration formatter (daemon/timefmt.py): its examples and unit boundaries."""
import doctest

import pytest

from hpcpredict.daemon import timefmt
from hpcpredict.daemon.timefmt import clock, human, human_range, slurm_time


def test_docstring_examples():
    failures, tried = doctest.testmod(timefmt)
    assert tried >= 3 and failures == 0


@pytest.mark.parametrize("seconds, text", [
    (0, "0 s"), (119, "119 s"), (120, "2.0 min"), (7199, "120.0 min"), (7200, "2.0 h"),
    (3 * 86400 - 1, "72.0 h"), (3 * 86400, "3.0 d"), (float("nan"), "?"), (float("inf"), "?")])
def test_human_unit_boundaries(seconds, text):
    assert human(seconds) == text


@pytest.mark.parametrize("low, high, text", [
    (10, 50, "10–50 s"), (2460, 3480, "41–58 min"), (90, 600, "90 s–10 min"), (3000, 3000, "50 min"),
    (7200, 10800, "2.0–3.0 h"), (3600, 9000, "60 min–2.5 h")])
def test_human_range(low, high, text):
    assert human_range(low, high) == text


@pytest.mark.parametrize("seconds, text", [(1, "00:01:00"), (3601, "01:01:00"), (86400, "1-00:00:00")])
def test_slurm_time_rounds_up_to_the_minute(seconds, text):
    assert slurm_time(seconds) == text


def test_clock():
    assert clock(3599.6) == "1:00:00" and clock(0) == "0:00:00"
