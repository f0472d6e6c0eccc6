"""`hpcpredict evaluate ...`: one sub-command per model family.

Each family registers itself from its own module (``evaluate_walltime``, ``evaluate_runtime``,
``evaluate_comm``...). Every evaluate command prints a human table by default and one JSON
object with ``--json``.
"""
from __future__ import annotations

import importlib

FAMILY_MODULES = ("evaluate_walltime", "evaluate_runtime")


def register(subparsers) -> None:
    parser = subparsers.add_parser("evaluate", help="score models on data (table, or --json)")
    families = parser.add_subparsers(dest="family", metavar="FAMILY")
    for name in FAMILY_MODULES:
        try:
            module = importlib.import_module(f"hpcpredict.daemon.cli.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"hpcpredict.daemon.cli.{name}":
                raise
            continue
        module.register(families)
    parser.set_defaults(handler=lambda args: parser.print_help() or 2)
