"""Entry point of the `hpcpredict` command.

Each command group lives in its own module of this package and exposes
``register(subparsers)``, which adds its parser; a handler returns the process exit code.
Every call imports every command module to build the parser, so a command module imports the
lab (scikit-learn, scipy, the trace readers) inside the handler that runs it: `hpcpredict
predict` on a login node must not pay the 0.9 s of importing what `train` needs.

Errors: any :class:`hpcpredict.daemon.errors.HpcPredictError` becomes one line
``hpcpredict: <message>`` on stderr and exit code 1; Ctrl-C exits 130; a closed pipe is quiet.
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import sys

from . import (comm, evaluate, explain, ingest, predict, refresh, reload, report, scaling, serve, status,
               suggest_runs, topology, train, when)
from .common import shown
from ..buildinfo import VersionAction
from ..errors import HpcPredictError

# Command modules, in the order `--help` lists them. Adding a command = adding a module here.
COMMAND_MODULES = (serve, predict, when, ingest, train, reload, status, refresh, evaluate, topology, comm, scaling,
                   suggest_runs, explain, report)


def build_parser() -> argparse.ArgumentParser:
    parser = PlainHelpParser(
        prog="hpcpredict",
        description="Runtime, walltime and communication-time prediction for Slurm jobs.",
    )
    parser.add_argument("--socket", "--local-socket", dest="socket", default=None,
                        help="the daemon's local socket (default: $HPCPREDICT_SOCKET, else [daemon] hook_socket)")
    parser.add_argument("--config", default=None,
                        help="TOML config file, the only one read (default: /etc/hpcpredict/hpcpredict.toml,"
                             " then ~/.config/hpcpredict/hpcpredict.toml, then embedded defaults)")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    parser.add_argument("--version", action=VersionAction)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


_ROLE = re.compile(r":[a-z]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")   # :mod:`x`, :func:`~a.b`, :class:`t <a.b>`
_LITERAL = re.compile(r"``([^`]+)``")


def plain_text(text: str) -> str:
    """Docstring markup (reStructuredText) as plain text, for --help: ``jobs`` -> jobs,
    :mod:`hpcpredict.daemon.suggestion` -> hpcpredict.daemon.suggestion.

    >>> plain_text("``jobs`` ended; the rule (:mod:`hpcpredict.daemon.suggestion`, :func:`~a.b`)")
    'jobs ended; the rule (hpcpredict.daemon.suggestion, b)'
    """
    text = _ROLE.sub(lambda match: match.group(1).rsplit(".", 1)[-1] if "~" in match.group(0) else match.group(1),
                     text)
    return _LITERAL.sub(r"\1", text)


class PlainHelpParser(argparse.ArgumentParser):
    """An ArgumentParser whose --help is plain text (several descriptions and epilogs are module
    docstrings); its sub-commands' parsers are of the same class (add_subparsers' default)."""

    def format_help(self) -> str:
        return plain_text(super().format_help())


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return int(args.handler(args) or 0)
    except HpcPredictError as error:
        print(shown(f"hpcpredict: {error}"), file=sys.stderr)   # errors quote what users wrote
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # Quiet on a closed pipe (`hpcpredict ... | head`), as ClusterShell does.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
