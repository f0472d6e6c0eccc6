"""`--help` is plain text: several descriptions and epilogs are module docstrings, whose
reStructuredText (``jobs``, :mod:`x`) a terminal shows as noise (#40)."""
from __future__ import annotations

import argparse
import re

from hpcpredict.daemon.cli.main import build_parser, plain_text
from hpcpredict.daemon.server import build_parser as daemon_parser

MARKUP = re.compile(r"``|:(?:mod|func|class|meth|data|attr):`")


def every_parser(parser: argparse.ArgumentParser):
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                yield from every_parser(sub)


def test_no_help_shows_docstring_markup():
    parsers = list(every_parser(build_parser())) + [daemon_parser()]
    assert len(parsers) > 20
    for parser in parsers:
        text = parser.format_help()
        assert not MARKUP.search(text), (parser.prog, MARKUP.search(text).group(0))
    report = next(p for p in parsers if p.prog.endswith(" report"))
    assert "Columns: jobs ended in the period" in report.format_help()


def test_plain_text_keeps_the_words():
    assert plain_text("``jobs`` (:mod:`hpcpredict.daemon.suggestion`, :func:`~a.b`)") == \
        "jobs (hpcpredict.daemon.suggestion, b)"
