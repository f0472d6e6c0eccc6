"""Property-based fuzzing of every input parser (small counts here; benchmarks/fuzz runs 10^5+).

For each target in :mod:`tests.fuzz.targets`: any input gives a value or one of our errors
with a one-line message naming the field (requests) or source/line (tool output); never
another exception, never a hang (hypothesis' per-example deadline).
"""
from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz.targets import all_targets, exercise

TARGETS = all_targets()
EXAMPLES = 120


@pytest.mark.parametrize("target", TARGETS, ids=[t.name for t in TARGETS])
def test_parser_never_crashes(target):
    outcomes = {"ok": 0, "rejected": 0}

    @settings(max_examples=EXAMPLES, deadline=timedelta(seconds=5), database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(target.strategy)
    def run(example):
        outcomes[exercise(target, example)] += 1

    run()
    assert sum(outcomes.values()) >= EXAMPLES // 2
