"""Topology parsing speed: a 10,000-host fat tree in ibnetdiscover and topology.conf form.

    python -m benchmarks run topology [--hosts 10000] [--allocation 4096] [--repeat 9]

The fabric is synthetic (generated in memory in the exact line formats of real
``ibnetdiscover`` output, default and ``-p``, and as a Slurm ``topology.conf``); the parsed
placement is checked against the generator's own answer before anything is timed
(benchmarks/topology/fabric_timing.py). Times are wall-clock best and median of the repeats,
which move with the machine's load (recorded by the runner), and the median CPU time of the
process (ticks of 4 ms on some VMs), which says what a step costs on a shared machine.
"""
from __future__ import annotations

import argparse

from benchmarks.topology.fabric_timing import measure

DESCRIPTION = "parse and place a 10,000-host fabric (ibnetdiscover, topology.conf); encode an allocation"
HEADLINE_STEPS = ("parse ibnetdiscover", "parse ibnetdiscover -p", "parse topology.conf",
                  "load placement JSON (daemon start/reload)")


def run(args: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks run topology", description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--allocation", type=int, default=4096, help="nodes in the encoded allocation")
    parser.add_argument("--tasks-per-node", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=9, help="runs per step (encode: 50, map_ranks: 20)")
    options = parser.parse_args(args)
    results = measure(options.hosts, options.allocation, options.tasks_per_node, options.repeat)
    steps = results["steps"]
    for timing in steps.values():
        for key in timing:
            timing[key] = round(timing[key], 2)
    encode = f"encode {options.allocation}-node allocation"
    results["headline"] = {"hosts": options.hosts, "ibnetdiscover_mb": round(results["ibnetdiscover_bytes"] / 1e6, 1),
                           **{step: steps[step] for step in HEADLINE_STEPS}, encode: steps[encode]}
    return results
