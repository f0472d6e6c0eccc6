"""The manual pages of ``hpcpredict`` and ``hpcpredictd``, written from their argparse parsers.

``python -m hpcpredict.daemon.cli.manpages DIR`` writes ``DIR/hpcpredict.1`` and
``DIR/hpcpredictd.1`` with argparse-manpage (the ``man`` extra); contrib/install-site.sh runs it
into ``PREFIX/share/man/man1``. The pages are never kept in the repository: they are made from
the parsers each time, so they cannot drift from ``--help``. Their date is ``SOURCE_DATE_EPOCH``
when set (reproducible builds), else today.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

PROJECT = "hpcpredict"
MANUAL = "hpcpredict manual"


def parsers() -> dict[str, argparse.ArgumentParser]:
    """The command name -> its parser, as the commands build them."""
    from ..server import build_parser as daemon_parser
    from .main import build_parser

    return {"hpcpredict": build_parser(), "hpcpredictd": daemon_parser()}


def page(parser: argparse.ArgumentParser) -> str:
    """``parser``'s manual page (roff)."""
    try:
        from argparse_manpage.manpage import Manpage
    except ImportError as error:
        from ..errors import HpcPredictError

        raise HpcPredictError("the man pages need argparse-manpage: pip install 'hpcpredict[man]' "
                              "(contrib/setup.sh and install-site.sh install it)") from error
    from ..buildinfo import build

    summary = (parser.description or "").split(". ")[0].rstrip(".")    # the NAME line: one phrase
    return str(Manpage(parser, {"project_name": PROJECT, "version": build()["version"], "manual_title": MANUAL,
                                "manual_section": 1, "description": summary}))


def write_pages(directory: str | Path) -> list[Path]:
    """Write every command's page into ``directory`` (made if missing); the files written."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, parser in parsers().items():
        path = folder / f"{name}.1"
        path.write_text(page(parser), encoding="utf-8")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    from ..errors import HpcPredictError

    parser = argparse.ArgumentParser(prog="python -m hpcpredict.daemon.cli.manpages",
                                     description="Write the man pages of hpcpredict and hpcpredictd into DIR.")
    parser.add_argument("directory", metavar="DIR")
    args = parser.parse_args(argv)
    try:
        for path in write_pages(args.directory):
            print(path)
    except (HpcPredictError, OSError) as error:
        print(f"manpages: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
