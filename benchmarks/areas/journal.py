"""Does the prediction journal pay on the hook path? The same daemon with and without it.

    python -m benchmarks run journal [--rates 500 1000] [--rounds 3] [--seconds 8]

Two ``hpcpredictd`` processes (benchmarks/load/interleaved.py): ``[store] journal_mib = 8`` (each
prediction copied into a memory-mapped journal, committed to SQLite in batches by a thread)
and ``journal_mib = 0`` (one SQLite transaction per prediction, WAL, no fsync), phases interleaved.
"""
from __future__ import annotations

import argparse

from benchmarks.load.interleaved import interleaved_ab

DESCRIPTION = "prediction journal vs one SQLite transaction per prediction, hook socket, interleaved A/B"
JOURNAL_MIB = {"journal": "8", "sqlite": "0"}


def run(argv: list[str]) -> dict:
    parser = argparse.ArgumentParser(prog="benchmarks run journal")
    parser.add_argument("--rates", type=float, nargs="+", default=[500.0, 1000.0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=8.0)
    args = parser.parse_args(argv)
    settings = {name: {"HPCPREDICT_STORE_JOURNAL_MIB": mib} for name, mib in JOURNAL_MIB.items()}
    return interleaved_ab(settings, args.rates, args.rounds, args.seconds, prefix="hpd-journal-ab-")
