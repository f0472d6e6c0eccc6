"""Inputs that are short but *expand* to something huge must be refused before expanding.

A 14-byte hostlist ``n[0-9999999]`` names ten million nodes; ``1(x2000000000)`` is two
billion task counts. Each case runs in a child process capped at 512 MiB of address space
and 60 s, so a parser that expands first fails here (MemoryError / timeout) instead of taking
the machine down (all three failed that way before the bounds were added).
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CHILD = textwrap.dedent("""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
    from hpcpredict.daemon.errors import HpcPredictError
    try:
        exec(sys.argv[1])
        print("ACCEPTED")
    except HpcPredictError as error:
        print("REFUSED", error)
    except MemoryError:
        print("MEMORY")
""")


def _outcome(statement: str) -> str:
    try:
        result = subprocess.run([sys.executable, "-c", CHILD, statement], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "TIMEOUT"
    lines = result.stdout.strip().splitlines()
    return lines[-1] if lines else f"EXIT {result.returncode}: {result.stderr.strip()[-200:]}"


def test_small_expansions_still_work():
    assert _outcome("from hpcpredict.topology.hostlist import expand; assert len(expand('n[0-999]')) == 1000") \
        == "ACCEPTED"
    assert _outcome("from hpcpredict.topology.mapping import parse_tasks_per_node as p; assert len(p('4(x100)')) == 100") \
        == "ACCEPTED"


def test_tasks_per_node_repeat_is_bounded():
    outcome = _outcome("from hpcpredict.topology.mapping import parse_tasks_per_node; "
                       "parse_tasks_per_node('1(x2000000000)')")
    assert outcome.startswith("REFUSED tasks_per_node"), outcome


def test_hostlist_range_is_bounded():
    outcome = _outcome("from hpcpredict.topology.hostlist import expand; expand('n[0-9999999]')")
    assert outcome.startswith("REFUSED"), outcome


def test_request_node_list_names_at_most_max_nodes():
    outcome = _outcome(
        "from hpcpredict.daemon.config import RequestBounds\n"
        "from hpcpredict.daemon.jobspec import job_spec_from_request\n"
        "from hpcpredict.proto.v1 import hpcpredict_pb2 as pb\n"
        "job_spec_from_request(pb.JobRequest(job=pb.JobIdentity(user='a'), node_list='n[0-99999999]'), RequestBounds())")
    assert outcome.startswith("REFUSED node_list"), outcome
