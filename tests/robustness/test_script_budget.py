"""A script costs the daemon a bounded amount of work, whatever it holds (issue 39, finding 5).

The script reader runs for the Slurm hook's Predict inside slurmctld's job write lock: one user's
scripts must not slow everyone's submissions. Work is counted (ParseBudget), not timed; the
times are in benchmarks/README.md ("Hostile scripts")."""
from __future__ import annotations

import os

import pytest

from hpcpredict.daemon.runtime.inputs import MAX_LINE_CHARS, MAX_PARSE_WORK, ParseBudget, extract_inputs
from tests.robustness.conftest import job, start
from tests.robustness.hostile_scripts import HOSTILE_SCRIPTS, PLAIN_SCRIPT, variant

FLAG = "script too costly to read"


@pytest.mark.parametrize("name", sorted(HOSTILE_SCRIPTS))
def test_a_hostile_script_costs_at_most_the_budget_and_says_so(name):
    unbounded = ParseBudget(1 << 40)
    extract_inputs(HOSTILE_SCRIPTS[name], {"A": "1"}, budget=unbounded)
    assert unbounded.spent > 3 * MAX_PARSE_WORK           # what reading it whole would cost
    budget = ParseBudget(MAX_PARSE_WORK)
    read = extract_inputs(HOSTILE_SCRIPTS[name], {"A": "1"}, budget=budget)
    # the budget is checked before each piece of work, and no piece exceeds one line's
    assert budget.spent <= MAX_PARSE_WORK + MAX_LINE_CHARS + 1
    assert read.inputs == {} and read.application == ""
    assert read.warnings and read.warnings[0].startswith(FLAG)


def test_a_plain_script_is_read_well_within_the_budget():
    budget = ParseBudget(MAX_PARSE_WORK)
    read = extract_inputs(PLAIN_SCRIPT, budget=budget)
    assert budget.spent < MAX_PARSE_WORK // 20
    assert read.application == "solver" and read.inputs["size"] == 400.0 and read.inputs["mesh"] == "fine"
    assert not any(w.startswith(FLAG) for w in read.warnings)


def test_a_script_of_a_few_thousand_plain_lines_is_still_read():
    script = b"#!/bin/bash\n" + b"echo step\n" * 3000 + b"srun ./solver --size=8\n"
    read = extract_inputs(script)
    assert read.application == "solver" and read.inputs == {"size": 8.0}


def test_the_daemon_answers_a_hostile_script_without_its_inputs_and_says_so(world_dir):
    daemon, client = start(world_dir)
    try:
        for index, name in enumerate(sorted(HOSTILE_SCRIPTS)):
            reply = client.stub.Predict(job(script=variant(HOSTILE_SCRIPTS[name], index)), timeout=30)
            assert reply.runtime_s > 0, name
            assert any(line.startswith(FLAG) for line in reply.explanation), (name, list(reply.explanation))
        plain = client.stub.Predict(job(script=PLAIN_SCRIPT), timeout=30)
        assert not any(line.startswith(FLAG) for line in plain.explanation)
    finally:
        client.close()
        daemon.stop()
