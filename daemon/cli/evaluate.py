"""`hpcpredict evaluate ...`: one sub-command per model family.

Each family registers itself from its own module (``evaluate_walltime``, ``evaluate_runtime``,
``evaluate_comm``...). Every evaluate command prints a human table by default and one JSON
object with ``--json``.
"""
from __future__ import annotations

FAMILY_MODULES = ("evaluate_walltime", "evaluate_runtime", "evaluate_scheduling")


def register(subparsers) -> None:
    parser = subparsers.add_parser("evaluate", help="score models on data (table, or --json)")
    from .main import register_modules

    register_modules(parser.add_subparsers(dest="family", metavar="FAMILY"), FAMILY_MODULES)
    parser.set_defaults(handler=lambda args: parser.print_help() or 2)
