"""`hpcpredict evaluate ...`: one sub-command per model family.

Each family registers itself from its own module (``evaluate_walltime``, ``evaluate_runtime``,
...). Every evaluate command prints a human table by default and one JSON
object with ``--json``.
"""
from __future__ import annotations

from . import evaluate_forecast, evaluate_runtime, evaluate_scheduling, evaluate_walltime

FAMILY_MODULES = (evaluate_walltime, evaluate_runtime, evaluate_scheduling, evaluate_forecast)


def register(subparsers) -> None:
    parser = subparsers.add_parser("evaluate", help="score models on data (table, or --json)")
    families = parser.add_subparsers(dest="family", metavar="FAMILY")
    for module in FAMILY_MODULES:
        module.register(families)
    parser.set_defaults(handler=lambda args: parser.print_help() or 2)
